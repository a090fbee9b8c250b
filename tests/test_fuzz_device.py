"""The differential fuzzer in device mode (tests/fuzz/README.md, "Device mode"): a handful of
programs whose tensors all live on the XLA device, run by plain lazy torch_xla and through
minidynamo's ``torchxla_trace_once``, must agree; the oracle's device plumbing is checked too.

The big runs are ``python -m bench.fuzz --device xla --backend torchxla_trace_once --n 300``.
"""

import pytest
import torch

import minidynamo
from tests.fuzz.generator import PRELUDE, SAFE_FEATURES, features_for
from tests.fuzz.oracle import make_args, run_program
from tests.fuzz.runner import fuzz

# A short batch (~20 s on 2 busy cores); seed and size picked from a clean device run (411 since the
# generator's `user_ctx` feature changed the programs of 410, which then captured 8 of 25: with-blocks
# that swallow an exception run eagerly).
DEVICE_SEED = 411
DEVICE_PROGRAMS = 25
_S = {"B": 2, "C": 3, "dtype": "float32", "n": 2, "xs": [1, 3], "nts": 1, "seed": 9,
      "reuse": False, "alias": False, "view": False, "grad": False}


@pytest.fixture(autouse=True)
def fresh_caches():
    minidynamo.reset()
    yield
    minidynamo.reset()


def test_short_seeded_device_fuzz(tmp_path):
    records = fuzz(DEVICE_SEED, range(DEVICE_PROGRAMS), SAFE_FEATURES, backend="torchxla_trace_once",
                   out_dir=str(tmp_path), do_minimize=False, device="xla")
    assert not any(r.get("setup_error") for r in records)
    bad = [f"index {r['index']}: {r['mismatch']}" for r in records if r["mismatch"]]
    assert not bad, "\n".join(bad)
    assert sum(1 for r in records if not r["f_fallbacks"]) > DEVICE_PROGRAMS // 3
    assert not any("random_ops" in r["features"] for r in records)


def test_device_mode_puts_every_input_tensor_on_the_device():
    args = make_args(dict(_S, view=True, alias=True), "xla")
    assert args[1] is args[0] and args[4][0] is args[0]
    assert all(t.device.type == "xla" for t in (args[0], args[4][0]))
    prelude = "\n\n".join(block for _, block in PRELUDE)
    body = ("assert x.device.type == MOD.scale.device.type == MOD.shift.device.type == 'xla'\n"
            "    return MOD(x), x[0], xs")
    steps = [("call", _S), ("exec", "MOD.shift = torch.tensor(1.0, dtype=torch.float64)"), ("call", _S)]
    out = run_program(f"{prelude}\n\ndef f(x, y, n, xs):\n    {body}\n", steps, "torchxla_trace_once", device="xla")
    assert out.mismatch is None and out.eager_errors == 0 and out.calls == 2


def test_device_oracle_sees_a_wrong_value():
    """A backend that adds 1e-3 to every output is caught on the device (the tolerance is 1e-4)."""
    def off_by_a_bit(gm, example_inputs):
        def run(*args):
            return [o + 1e-3 if isinstance(o, torch.Tensor) and o.is_floating_point() else o for o in gm(*args)]
        return run
    prelude = "\n\n".join(block for _, block in PRELUDE)
    out = run_program(f"{prelude}\n\ndef f(x, y, n, xs):\n    return x * 2 + y\n", [("call", _S)],
                      off_by_a_bit, device="xla")
    assert out.mismatch and out.mismatch.startswith("value:")


def test_device_features():
    assert "random_ops" not in features_for(SAFE_FEATURES, "xla")
    assert features_for(SAFE_FEATURES, "cpu") == SAFE_FEATURES
