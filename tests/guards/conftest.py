"""Every guards test runs once per way of checking tensors that is built: C++ reading at::Tensor
("cpp"), the C helper calling the getters ("c"), and the generated Python ("python")."""

import pytest

from guards import native


@pytest.fixture(autouse=True, params=native.MODES)
def tensor_check_mode(request, monkeypatch):
    """True when the guards under test may use compiled helpers."""
    monkeypatch.setattr(native, "mode", request.param)
    return native.compiled()
