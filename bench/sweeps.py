"""What the model sweeps (``timm_sweep``, ``torchvision_sweep``) share: their command line, the
comparison of a tensor up to float32 rounding, and the table they print.

A sweep gives ``run_table`` its model names and a ``run_one(name, backend, train, calls, dtype)``
that returns a row: ``equal`` (True, False, or None where the outputs are not compared),
``graphs``, ``recompiles``, ``breaks``, ``fallbacks``, ``seconds`` and ``reason``.
"""

from __future__ import annotations

import argparse
import warnings

import torch


def parse(argv, doc: str, models) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--only", default="", help="comma-separated model names")
    parser.add_argument("--train", action="store_true", help="train mode, a backward per call")
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--float64", action="store_true", help="models and inputs in double precision")
    args = parser.parse_args(argv)
    args.names = [n for n in args.only.split(",") if n] or list(models)
    args.dtype = torch.float64 if args.float64 else torch.float32
    return args


def close(a, b, floor: float = 0.0) -> bool:
    """Equal up to float32 rounding in another summation order (XLA:CPU against ATen's CPU
    kernels): the largest difference within 1e-3 of the tensor's largest element, plus
    ``floor``.  A gradient that is zero in exact arithmetic (a bias before a train-mode batch
    norm) is rounding noise on both sides, of the size of the gradients around it, not its own:
    the caller passes a floor of 1e-6 of the model's largest gradient (plain lazy torch_xla
    differs from eager by as much there)."""
    if a.shape != b.shape:
        return False
    if not a.numel():
        return True
    return (a - b).abs().max().item() <= 1e-5 + floor + 1e-3 * a.abs().max().item()


def run_table(args, run_one, width: int = 30) -> list:
    """Each model's row as it finishes, then the totals; a model that cannot be built here is
    reported, not fatal."""
    warnings.filterwarnings("ignore")
    rows = []
    print(f"{'model':{width}s} {'equal':6s} {'graphs':>6s} {'recompiles':>10s} {'breaks':>6s} {'fallbacks':>9s} "
          f"{'s':>6s}  reason")
    for name in args.names:
        try:
            row = run_one(name, args.backend, args.train, args.calls, args.dtype)
        except Exception as error:    # noqa: BLE001
            print(f"{name:{width}s} ERROR {type(error).__name__}: {str(error)[:120]}", flush=True)
            continue
        rows.append(row)
        equal = "n/a" if row["equal"] is None else str(row["equal"])
        print(f"{name:{width}s} {equal:6s} {row['graphs']:6d} {row['recompiles']:10d} {row['breaks']:6d} "
              f"{row['fallbacks']:9d} {row['seconds']:6.1f}  {row['reason'][:110]}", flush=True)
    one = sum(r["equal"] is not False and r["graphs"] - r["recompiles"] == 1 and not r["breaks"] and not r["fallbacks"]
              for r in rows)
    compared = [r for r in rows if r["equal"] is not None]
    print(f"\n{len(rows)} models ({'train' if args.train else 'inference'}, backend {args.backend}"
          f"{', float64' if args.float64 else ''}): {sum(r['equal'] for r in compared)} of {len(compared)} "
          f"compared equal to eager on every call, {one} in one graph")
    return rows
