"""Hugging Face transformers in training: the same few SGD steps eagerly and through minidynamo.

    python -m bench.hf_train                                   # every model of bench.hf_sweep, eager backend
    PJRT_DEVICE=CPU python -m bench.hf_train --only bert,swin --backend torchxla_trace_once

Each model (``bench.hf_sweep``'s small random-init configs) is put in train mode, dropout on,
and trained for ``--steps`` SGD steps on the same batches twice: eagerly on the CPU, and
through ``minidynamo.optimize(backend)`` (on the XLA device for the XLA backends).  Both runs
start from the same weights and the same torch and NumPy seeds, so dropout masks must be the
same: the XLA bridge draws a graph's random numbers on the host generator, as eager does.
Per model: whether every loss and every weight after the last step agrees with eager, graphs
compiled, graph breaks and fallbacks (with the first reasons).  Not a test: minutes.

Tied weights (``bart``'s shared embeddings) are compared by name where both models have them:
moving a model to the XLA device unties them (``Module.to`` makes a new parameter per module).
Run the XLA backends in a process that has not run a backward before torch_xla was loaded
(autograd's engine makes its device queues once): this script loads it first, and runs each
model in a process of its own.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys

import torch

from bench import hf_sweep


def _batches(inputs, steps):
    generator = torch.Generator().manual_seed(0)
    return [inputs(generator) for _ in range(steps)]


def _train(model, fn, batches, device):
    """Losses of SGD steps on ``batches``; torch and NumPy seeded alike for every run."""
    import numpy

    torch.manual_seed(1234)
    numpy.random.seed(0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for batch in batches:
        out = fn(**{k: v.to(device) for k, v in batch.items()})
        first = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
        loss = first.float().pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses


def run_one(name, backend, steps, device):
    import minidynamo

    model, inputs = hf_sweep.build(name, True)
    model.train()
    reference = copy.deepcopy(model)
    batches = _batches(inputs, steps)
    expected = _train(reference, reference, batches, "cpu")
    minidynamo.reset()
    model.to(device)
    got = _train(model, minidynamo.optimize(backend)(model), batches, device)
    ours, theirs = dict(model.named_parameters()), dict(reference.named_parameters())
    weight_error = max((ours[k].detach().cpu() - theirs[k].detach()).abs().max().item()
                       for k in theirs if k in ours)
    losses_agree = all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(got, expected))
    counters = minidynamo.counters
    return {"model": name, "losses agree": losses_agree, "weight error": weight_error,
            "compiles": counters["compiles"], "breaks": len(counters["break_reasons"]),
            "fallbacks": len(counters["fallback_reasons"]),
            "reasons": list(counters["fallback_reasons"][:2]) + list(counters["break_reasons"][:2])}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="", help="comma-separated model names (default: all of hf_sweep)")
    parser.add_argument("--backend", default="eager", choices=["eager", "torchxla_trivial", "torchxla_trace_once"])
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    device = "cpu"
    if args.backend.startswith("torchxla"):
        import torch_xla

        device = torch_xla.device()       # before any backward: autograd's engine needs its queue
    names = [n for n in args.only.split(",") if n] or list(hf_sweep._models())
    if len(names) > 1 and device != "cpu":
        return _each_in_its_own_process(names, args)
    print(f"{'model':16} {'losses agree':>12} {'weight error':>12} {'compiles':>8} {'breaks':>6} {'fallbacks':>9}")
    rows = []
    for name in names:
        try:
            row = run_one(name, args.backend, args.steps, device)
        except Exception as error:        # one model's failure is a row, not the end of the run
            row = {"model": name, "raised": f"{type(error).__name__}: {str(error)[:200]}"}
        rows.append(row)
        if "raised" in row:
            print(f"{name:16} RAISED {row['raised']}", flush=True)
            continue
        print(f"{name:16} {str(row['losses agree']):>12} {row['weight error']:>12.2e} {row['compiles']:>8} "
              f"{row['breaks']:>6} {row['fallbacks']:>9}", flush=True)
        for reason in row["reasons"]:
            print(f"    {' '.join(reason.split())[:240]}")
    agree = sum(1 for r in rows if r.get("losses agree"))
    print(f"\n{agree}/{len(rows)} models train as eager does ({args.backend}, {args.steps} steps)")
    return 0 if agree == len(rows) else 1


def _each_in_its_own_process(names, args):
    """One process per model on the XLA device: XLA:CPU's compiler can fail on a large lazy
    graph (an optimizer step left pending: "LLVM compilation error: Cannot allocate memory",
    then a crash; plain torch_xla does the same), which must not end the other models' runs."""
    import subprocess

    agree = 0
    for name in names:
        proc = subprocess.run([sys.executable, "-m", "bench.hf_train", "--only", name, "--backend", args.backend,
                               "--steps", str(args.steps)], capture_output=True, text=True)
        rows = [line for line in proc.stdout.splitlines()[1:] if line.strip() and "models train" not in line]
        print("\n".join(rows) if rows else f"{name:16} CRASHED (exit code {proc.returncode})", flush=True)
        agree += any(line.split()[:2] == [name, "True"] for line in rows)
    print(f"\n{agree}/{len(names)} models train as eager does ({args.backend}, {args.steps} steps)")
    return 0 if agree == len(names) else 1


if __name__ == "__main__":
    sys.exit(main())
