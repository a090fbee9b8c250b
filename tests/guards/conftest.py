"""Every guards test runs once per way of checking guards that is built: compiled (C++ reading
at::Tensor, the FastGuard, the C memo: "cpp") and the generated Python alone ("python")."""

import pytest

from guards import native


@pytest.fixture(autouse=True, params=native.MODES)
def tensor_check_mode(request, monkeypatch):
    """True when the guards under test may use compiled helpers."""
    monkeypatch.setattr(native, "mode", request.param)
    return native.compiled()
