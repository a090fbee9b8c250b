"""What the host-data policy costs torchxla_trace_once, per call, interleaved in one process.

    PJRT_DEVICE=CPU python -m bench.host_data_cost [--model mobilenet_v2] [--small] [--calls 40]

The same model (eval, no_grad, batch 1), one compiled trace_once graph per placement, each
call returning a CPU tensor. Set-ups, called in rotating order so machine noise hits all alike:

    device model, input already on the device   no copy at all: what the old _version cache gave
                                                 the bench when an iteration reused its input
    device model, fresh CPU input               the input copied in every call: the bench now
    host model (default)                         the input and every weight copied every call
    host model, cache_host_weights=True          the input copied, weights kept while _version
                                                 stays (xla_bridge.config's opt-in; stale risk)

Prints the median ms per call and the difference to the first set-up. Every call's output is
checked against eager PyTorch on the CPU once, before timing.
"""

import argparse
import copy
import os
import statistics
import time

os.environ.setdefault("PJRT_DEVICE", "CPU")

import torch                      # noqa: E402
import torch.fx as fx             # noqa: E402

import xla_bridge                 # noqa: E402
from bench.models import REGIMES, build_model, make_inputs   # noqa: E402
from xla_bridge import device as dev   # noqa: E402


def setups(model, x):
    """name -> zero-argument call returning a CPU tensor (inputs made outside: see ``fresh``)."""
    device = dev.xla_device()
    on_device = copy.deepcopy(model).to(device)
    x_device = x.to(device)
    replay_device = xla_bridge.torchxla_trace_once(fx.symbolic_trace(on_device), [x_device])
    host_graph = fx.symbolic_trace(model)
    replay_host = xla_bridge.torchxla_trace_once(host_graph, [x])
    replay_cached = xla_bridge.torchxla_trace_once(host_graph, [x], cache_host_weights=True)
    return {
        "device model, input on device": (lambda: x_device,
                                          lambda a: replay_device(a).cpu()),
        "device model, fresh CPU input": (lambda: x.clone(),
                                          lambda a: replay_device(a.to(device)).cpu()),
        "host model (default)": (lambda: x.clone(), replay_host),
        "host model, cache_host_weights": (lambda: x.clone(), replay_cached),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mobilenet_v2")
    parser.add_argument("--small", action="store_true", help="32x32 images (the overhead-bound regime)")
    parser.add_argument("--calls", type=int, default=40)
    args = parser.parse_args(argv)
    regime = REGIMES["small" if args.small else "standard"]
    model = build_model(args.model, regime, seed=0)
    (x,) = make_inputs(args.model, regime, 1, torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = model(x)
        calls = setups(model, x)
        for name, (fresh, call) in calls.items():
            for _ in range(3):                       # compile, warm the caches
                out = call(fresh())
            torch.testing.assert_close(out, expected, atol=1e-3, rtol=1e-3, msg=name)
        times = {name: [] for name in calls}
        names = list(calls)
        for i in range(args.calls):
            for name in names[i % len(names):] + names[:i % len(names)]:
                fresh, call = calls[name]
                inputs = fresh()                     # outside the clock
                start = time.perf_counter()
                call(inputs)
                times[name].append(time.perf_counter() - start)
    weights_mb = sum(t.numel() * t.element_size() for t in model.state_dict().values()) / 1e6
    print(f"{args.model} {regime.name} regime, batch 1, {weights_mb:.1f} MB of weights; "
          f"median of {args.calls} interleaved calls of torchxla_trace_once")
    first = statistics.median(times[names[0]])
    print(f"{'set-up':<34}{'ms/call':>10}{'vs first':>12}")
    for name in names:
        median = statistics.median(times[name])
        print(f"{name:<34}{1e3 * median:>10.2f}{1e3 * (median - first):>+11.2f}")
    print("bridge counters:", {k: v for k, v in xla_bridge.counters.as_dict().items() if k != "reasons"})


if __name__ == "__main__":
    main()
