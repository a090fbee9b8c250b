"""Per-call time of the XLA lazy baseline, torchxla_trivial and torchxla_trace_once on
torchvision resnet18 at batch 1 (eval, no_grad), interleaved in one process.

    PJRT_DEVICE=CPU python -m bench.xla_resnet18 [--calls 20] [--inputs cpu|xla|both]
                                                 [--cache-host-weights]

inputs=cpu: the input and the model start on the CPU and the output is brought back to the CPU
(the backends get a CPU graph and copy x and every weight to the device on every call, the
sound default; with ``--cache-host-weights`` they keep the weights' device copies while their
``_version`` stays, the opt-in of ``xla_bridge.config``; x is a new tensor every call).
inputs=xla: model and input already live on the device; every variant ends with ``.cpu()`` of
the output, so each call is waited for in the same way. Prints median ms per call and, for
the two backends, the per-call phase breakdown from ``xla_bridge.phase_timer``.
"""

import argparse
import copy
import os
import statistics
import time

os.environ.setdefault("PJRT_DEVICE", "CPU")

import torch                      # noqa: E402
import torch.fx as fx             # noqa: E402
import torchvision                # noqa: E402

import xla_bridge                 # noqa: E402
from xla_bridge import device as dev   # noqa: E402


def variants(model, x, inputs, cache_host_weights=False):
    """name -> zero-argument call returning a CPU tensor."""
    device = dev.xla_device()
    xla_model = (model if inputs == "xla" else copy.deepcopy(model)).to(device)
    x_xla = x.to(device)
    fresh = (lambda: x_xla) if inputs == "xla" else (lambda: x.clone())  # cpu: a new tensor
                                                                         # per call, for all

    def baseline():
        out = xla_model(fresh().to(device))
        dev.torch_xla().sync()
        return out.cpu()

    gm = fx.symbolic_trace(xla_model if inputs == "xla" else model)
    example = x_xla if inputs == "xla" else x
    trivial = xla_bridge.torchxla_trivial(gm, [example], cache_host_weights=cache_host_weights)
    trace_once = xla_bridge.torchxla_trace_once(gm, [example], cache_host_weights=cache_host_weights)
    return {"xla_lazy_baseline": baseline,
            "torchxla_trivial": lambda: trivial(fresh()).cpu(),
            "torchxla_trace_once": lambda: trace_once(fresh()).cpu()}


def measure(calls_by_name, count):
    times = {name: [] for name in calls_by_name}
    for _ in range(count):
        for name, call in calls_by_name.items():
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(ts) for name, ts in times.items()}


def phases(call, count):
    with xla_bridge.phase_timer() as timer:
        for _ in range(count):
            call()
    return {phase: 1000 * seconds / count for phase, seconds in timer.totals.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--inputs", choices=("cpu", "xla", "both"), default="both")
    parser.add_argument("--cache-host-weights", action="store_true",
                        help="inputs=cpu: keep host weights' device copies (xla_bridge.config's "
                             "opt-in; stale if a weight changes without bumping _version)")
    args = parser.parse_args()
    torch.manual_seed(0)
    for inputs in (("cpu", "xla") if args.inputs == "both" else (args.inputs,)):
        model = torchvision.models.resnet18(weights=None).eval()
        x = torch.randn(1, 3, 224, 224)
        with torch.no_grad():
            expected = model(x)
            calls = variants(model, x, inputs, args.cache_host_weights)
            for name, call in calls.items():
                for _ in range(3):                       # compile, warm the caches
                    out = call()
                error = (out - expected).abs().max().item()
                print(f"[inputs={inputs}] {name}: max |out - cpu eager| = {error:.2e}")
            medians = measure(calls, args.calls)
            base = medians["xla_lazy_baseline"]
            print(f"\nresnet18 batch 1, inputs on {inputs}: median of {args.calls} calls")
            print(f"{'variant':<22}{'ms/call':>10}{'speedup':>10}")
            for name, seconds in medians.items():
                print(f"{name:<22}{1000 * seconds:>10.2f}{base / seconds:>9.2f}x")
            for name in ("torchxla_trivial", "torchxla_trace_once"):
                split = phases(calls[name], args.calls)
                print(f"  {name} phases (ms/call): "
                      + ", ".join(f"{p}={ms:.2f}" for p, ms in split.items()))
            print()
    counted = xla_bridge.counters.as_dict()
    print("bridge counters:", {k: v for k, v in counted.items() if k != "reasons"})
    print("reasons:", xla_bridge.counters.reasons)


if __name__ == "__main__":
    main()
