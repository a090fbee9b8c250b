"""Every guards test runs twice: tensor checks in the C helper (when built) and in pure Python."""

import pytest

from guards import native


@pytest.fixture(autouse=True, params=["c_helpers", "pure_python"])
def tensor_check_mode(request, monkeypatch):
    use_c = request.param == "c_helpers" and native.TensorMatch is not None
    monkeypatch.setattr(native, "enabled", use_c)
    return use_c
