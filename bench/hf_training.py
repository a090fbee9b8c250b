"""Hugging Face transformers trained through ``torchxla_trace_once``: does each architecture's
training step replay (forward and backward graphs by hash), and are its gradients eager's?

    python -m bench.hf_training                          # every model of bench.hf_sweep
    python -m bench.hf_training --only bert,gpt2 --device xla

Per model: the step's loss and every parameter's gradient compared with eager on the CPU over
``--calls`` calls (fresh inputs each), and what the bridge did: training plans made, graphs
compiled, replays, fallbacks with their first reason.  The models are ``bench.hf_sweep``'s
small random-init configs (eval mode: no dropout, so the two runs see one function; grad mode
on).  ``--device xla`` puts the model and inputs on the XLA device first (the program then
names that device itself: ``.to(input.device)``); moving BART-like models there unties their
shared embeddings (plain lazy XLA leaves ``shared.weight.grad`` None too), which shows as a
difference from the CPU model.  Not a test: it takes minutes.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys

os.environ.setdefault("PJRT_DEVICE", "CPU")

import torch  # noqa: E402

from bench import hf_sweep  # noqa: E402


def _loss(out) -> torch.Tensor:
    """Mean square of every floating output that requires grad (summed), as a float."""
    tensors = [t for t in hf_sweep.flatten(out)
               if isinstance(t, torch.Tensor) and t.is_floating_point() and t.requires_grad]
    return sum(t.float().square().mean() for t in tensors)


def _moved(inputs: dict, device) -> dict:
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}


def train_one(name: str, device: str, calls: int) -> dict:
    """One architecture: ``calls`` steps eager (CPU) and optimized; what differed, what ran."""
    import minidynamo
    import xla_bridge
    from xla_bridge import device as dev

    target = dev.xla_device() if device == "xla" else torch.device("cpu")
    model, make_inputs = hf_sweep.build(name, True)
    ours = copy.deepcopy(model).to(target)
    minidynamo.reset()
    xla_bridge.reset_counters()
    optimized = minidynamo.optimize("torchxla_trace_once")(ours)
    problems = []
    for call in range(calls):
        inputs = make_inputs(torch.Generator().manual_seed(call))
        for m in (model, ours):
            m.zero_grad(set_to_none=True)
        expected = _loss(model(**inputs))
        expected.backward()
        got = _loss(optimized(**_moved(inputs, target)))
        got.backward()
        if not torch.allclose(got.detach().cpu(), expected.detach(), rtol=1e-3, atol=1e-5):
            problems.append(f"call {call}: loss {got.item():.6g} vs eager {expected.item():.6g}")
        theirs = dict(ours.named_parameters())
        for param_name, p in model.named_parameters():
            q = theirs[param_name]
            if p.shape != q.shape:              # a weight tying that the move did not keep
                problems.append(f"call {call}: {param_name} is {list(q.shape)}, eager's {list(p.shape)}")
            elif (p.grad is None) != (q.grad is None):
                problems.append(f"call {call}: {param_name}.grad is None in one run only")
            elif p.grad is not None and not torch.allclose(q.grad.cpu(), p.grad, rtol=1e-3, atol=1e-4):
                error = (q.grad.cpu() - p.grad).abs().max().item()
                problems.append(f"call {call}: {param_name}.grad differs by {error:.2e}")
    counters = xla_bridge.counters
    return dict(name=name, problems=problems, plans=len(counters.training_plans),
                compiles=counters.compiles, replays=counters.replays, fallbacks=counters.fallbacks,
                reason=(counters.reasons or [""])[0])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated architectures (default: all)")
    parser.add_argument("--device", choices=("cpu", "xla"), default="cpu",
                        help="where the model and inputs live before the call")
    parser.add_argument("--calls", type=int, default=3)
    options = parser.parse_args(argv)
    names = options.only.split(",") if options.only else list(hf_sweep._models())
    print(f"{'model':16s} {'grads':6s} {'plans':>5s} {'compiles':>8s} {'replays':>7s} "
          f"{'fallbacks':>9s}  first reason / problem")
    same = replayed = 0
    for name in names:
        try:
            row = train_one(name, options.device, options.calls)
        except Exception as error:          # eager itself failing is reported, not hidden
            print(f"{name:16s} error  {type(error).__name__}: {str(error)[:100]}", flush=True)
            continue
        ok = not row["problems"]
        same += ok
        replayed += row["plans"] > 0 and row["fallbacks"] == 0
        detail = row["problems"][0] if row["problems"] else row["reason"][:100]
        print(f"{name:16s} {'same' if ok else 'DIFF':6s} {row['plans']:5d} {row['compiles']:8d} "
              f"{row['replays']:7d} {row['fallbacks']:9d}  {detail}", flush=True)
    print(f"\n{same}/{len(names)} with eager's losses and gradients on every call; "
          f"{replayed}/{len(names)} trained through replayed graphs with no fallback")
    return 0


if __name__ == "__main__":
    sys.exit(main())
