"""Every guards test runs twice: tensor checks in the C helper (when built) and in pure Python."""

import pytest

from guards import codegen


@pytest.fixture(autouse=True, params=["c_helpers", "pure_python"])
def tensor_check_mode(request, monkeypatch):
    use_c = request.param == "c_helpers" and codegen.TensorMatch is not None
    monkeypatch.setattr(codegen, "use_c_helpers", use_c)
    return use_c
