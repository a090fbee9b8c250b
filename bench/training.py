"""``python -m bench --training``: time one training step per peer, with gradients checked.

One step = optimized forward on the XLA device + loss + backward + SGD step + ``sync``, the
canonical PyTorch/XLA training loop, for every peer alike (model on the device, CPU inputs
moved in with the same call, the loss read back with ``.item()`` by nobody inside the timed
window):

    xla_lazy             (baseline) the model run lazily: forward, backward and optimizer traced
                         anew every step, hashed and replayed by ``sync``
    torchxla_trace_once  minidynamo: guards, then the forward graph and the backward graph,
                         each replayed by hash (xla_bridge/training.py)
    torchxla_trivial     minidynamo: the graph run lazily with autograd (traced every step)
    openxla              torch.compile(model, backend="openxla"): dynamo + AOT autograd

Models train in ``train()`` mode (batch norm updates its running stats) with dropout switched
off (``eval()`` on the Dropout modules), so every peer computes the same gradients from the same
weights and inputs: after the first step each peer's parameter gradients are compared with the
baseline's with ``bench.accuracy``'s tolerance, except that the absolute part scales with the
largest gradient of the whole model rather than of each tensor (``compare_grads``): some
gradients are zero by symmetry (BERT's attention key bias: softmax ignores a per-row constant),
so every peer returns float noise of 1e-11 there, which a per-tensor scale would call wrong.
The loss is ``mean(out**2)`` over the model's output, a stand-in that exercises a full
backward. Iterations rotate the peers' order; the median step time is the peer's time,
speedup = baseline median / peer median. The first step
(capture, joint graph, XLA compiles) is reported apart, as is trace_once's saved-activation
memory (``xla_bridge.counters.training_plans``).

``--breakdown``: a few instrumented steps per peer, phases separated by device barriers:
transfer_in, guard (minidynamo's guard function timed alone, as in the inference breakdown),
forward (the rest of the call: forward replay dispatch for trace_once; the lazy trace for the
baseline; all of dynamo for openxla), backward (loss and backward), optimizer (SGD's lazy
update), sync (hash, lookup and dispatch of what is pending), execute (XLA execution, from the
runtime's ``ExecuteTime`` wherever it ran).
Writes ``<output>/training/{speedups.csv, results.json, speedups.png[, breakdown.png]}``.
"""

import argparse
import copy
import csv
import gc
import json
import os
import time

from bench import xla_probe
from bench.accuracy import ATOL, RTOL
from bench.models import MODELS, REGIMES, make_inputs
from bench.options import ALL_MODELS, DEFAULT_MODELS
from bench.stats import geomean, median

BASELINE = "xla_lazy"
PEERS = ("torchxla_trace_once", "torchxla_trivial", "openxla")
DEFAULT_PEERS = ("torchxla_trace_once", "openxla")
PHASES = ("transfer_in", "guard", "forward", "backward", "optimizer", "sync", "execute")
LEARNING_RATE = 1e-3


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m bench --training",
                                     description="Time one training step per peer.")
    parser.add_argument("--only", action="append", choices=ALL_MODELS, metavar="MODEL")
    parser.add_argument("--peer", action="append", choices=PEERS,
                        help="contender (repeatable); default: %s" % ", ".join(DEFAULT_PEERS))
    parser.add_argument("--small", action="store_true", help="32x32 images, sequence 16")
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--breakdown", action="store_true")
    parser.add_argument("--output", default="bench_results")
    parser.add_argument("--seed", type=int, default=1337)
    return parser.parse_args(argv)


def build_training_model(name, regime, seed):
    """Random weights from ``seed``, train mode, gradients on, dropout off (see the docstring)."""
    import torch

    torch.manual_seed(seed)
    model = MODELS[name].build(regime).train()
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.eval()
    for parameter in model.parameters():
        parameter.requires_grad_(True)
    return model


GRADS_TOLERANCE_TEXT = f"|got-ref| <= {RTOL:g}*|ref| + {ATOL:g}*max|ref over all grads|"


def compare_grads(reference, grads):
    """(ok, max abs error, reason) of each parameter's grad against the baseline's."""
    import torch

    if len(reference) != len(grads):
        return False, float("inf"), "parameter count differs"
    present = [r for r in reference if r is not None]
    scale = max((float(r.abs().max()) for r in present if r.numel()), default=0.0)
    worst = 0.0
    for k, (ref, got) in enumerate(zip(reference, grads)):
        if (ref is None) != (got is None):
            return False, float("inf"), f"parameter {k}: grad is None for one peer only"
        if ref is None:
            continue
        ref, got = ref.double(), got.double()
        error = (got - ref).abs()
        worst = max(worst, float(error.max()) if error.numel() else 0.0)
        if not bool((error <= RTOL * ref.abs() + ATOL * scale).all()) or \
                not torch.isfinite(got).all():
            return False, worst, f"parameter {k} {list(ref.shape)}: max error {worst:.3g} " \
                                 f"(largest gradient {scale:.3g})"
    return True, worst, ""


class TrainingPeer:
    """One contender: its own copy of the model on the device, an SGD optimizer, ``step``."""

    def __init__(self, name, model):
        import torch

        self.name = name
        self.device = xla_probe.device()
        self.model = copy.deepcopy(model).to(self.device)
        xla_probe.sync()
        if name == BASELINE:
            self.forward = self.model
        elif name == "openxla":
            self.forward = torch.compile(self.model, backend="openxla")
        else:
            import minidynamo

            self.forward = minidynamo.optimize(name)(self.model)
        self.optimized, self.uses_xla = self.forward, True    # for ``guard_seconds``
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=LEARNING_RATE)

    def step(self, inputs, laps=None):
        """One training step; returns the loss (a device tensor, not read back)."""
        lap = laps.lap if laps is not None else (lambda phase: None)
        self.optimizer.zero_grad(set_to_none=True)
        on_device = xla_probe.to_device(inputs, self.device)
        lap("transfer_in")
        out = self.forward(*on_device)
        lap("forward")
        loss = out.float().square().mean()
        loss.backward()
        lap("backward")
        self.optimizer.step()
        lap("optimizer")
        xla_probe.sync()
        lap("sync")
        return loss

    def guard_seconds(self, inputs):
        """minidynamo's guard for this step's cache entry, timed alone (None for the others)."""
        if self.name not in ("torchxla_trace_once", "torchxla_trivial"):
            return None
        from bench.peers import Minidynamo

        seconds = Minidynamo.guard_seconds(self, inputs)
        return seconds if isinstance(seconds, float) else None

    def grads(self):
        return [p.grad for p in self.model.parameters()]


def _timed(peer, inputs):
    start = time.perf_counter()
    loss = peer.step(inputs)
    xla_probe.wait_device()
    return time.perf_counter() - start, loss


def run_model(name, regime, options, peers):
    import torch

    import xla_bridge
    from bench.peers import _Laps

    model = build_training_model(name, regime, options.seed)
    inputs = make_inputs(name, regime, options.batch_size,
                         torch.Generator().manual_seed(options.seed))
    row = {"model": name, "regime": regime.name, "batch_size": options.batch_size, "peers": {}}
    contenders = [BASELINE, *peers]
    prepared, reference = {}, None
    xla_bridge.reset_counters()
    for peer_name in contenders:
        entry = row["peers"][peer_name] = {}
        try:
            peer = TrainingPeer(peer_name, model)
            compiled_ns = xla_probe.compile_ns()
            seconds, loss = _timed(peer, inputs)
            entry["first_step_s"] = seconds
            entry["first_step_compile_s"] = (xla_probe.compile_ns() - compiled_ns) / 1e9
            entry["first_loss"] = float(loss.item())
            grads = [None if g is None else g.cpu() for g in peer.grads()]
            if peer_name == BASELINE:
                reference = grads
            else:
                ok, error, reason = compare_grads(reference, grads)
                entry["grads_ok"], entry["grads_max_abs_error"], entry["grads_reason"] = \
                    ok, error, reason
            prepared[peer_name] = peer
        except Exception as error:     # a peer that cannot train is reported, not fatal
            entry["error"] = f"{type(error).__name__}: {(str(error).splitlines() or [''])[0][:200]}"
        if peer_name == "torchxla_trace_once":
            entry["bridge"] = {k: v for k, v in xla_bridge.counters.as_dict().items()
                               if k != "reasons"}
            entry["bridge_reasons"] = list(xla_bridge.counters.reasons)
            plans = xla_bridge.counters.training_plans
            entry["saved_activation_bytes"] = plans[-1]["saved_bytes"] if plans else None
    names = list(prepared)
    for _ in range(options.warmup):
        for peer_name in names:
            _timed(prepared[peer_name], inputs)
    compiles_before = xla_probe.compile_ns()
    bridge_before = xla_bridge.counters.compiles
    samples = {peer_name: [] for peer_name in names}
    gc.disable()
    try:
        for iteration in range(options.iterations):
            order = names[iteration % len(names):] + names[:iteration % len(names)]
            for peer_name in order:
                samples[peer_name].append(_timed(prepared[peer_name], inputs)[0])
    finally:
        gc.enable()
    row["compiles_during_timing"] = int(xla_probe.compile_ns() != compiles_before)
    row["bridge_compiles_during_timing"] = xla_bridge.counters.compiles - bridge_before
    for peer_name in names:
        row["peers"][peer_name]["step_s"] = median(samples[peer_name])
    base = row["peers"].get(BASELINE, {}).get("step_s")
    for peer_name in names:
        step = row["peers"][peer_name]["step_s"]
        row["peers"][peer_name]["speedup"] = base / step if base and step else None
    if options.breakdown:
        for peer_name in names:
            runs = []
            for _ in range(3):
                laps = _Laps()
                prepared[peer_name].step(inputs, laps)
                runs.append(laps.phases)
            split = {phase: median([r.get(phase, 0.0) for r in runs]) for phase in PHASES}
            guard = prepared[peer_name].guard_seconds(inputs)
            if guard is not None:               # timed apart, taken out of the forward phase
                split["guard"] = guard
                split["forward"] = max(0.0, split["forward"] - guard)
            row["peers"][peer_name]["breakdown_s"] = split
    return row


def report(rows, peers, options, directory):
    os.makedirs(directory, exist_ok=True)
    contenders = [BASELINE, *peers]
    header = f"{'model':<24}" + "".join(f"{p:>22}" for p in contenders)
    lines = [f"training step, {'small' if options.small else 'standard'} regime, batch "
             f"{options.batch_size}: median step (speedup vs {BASELINE}); grads vs baseline: "
             f"{GRADS_TOLERANCE_TEXT}", header]
    for row in rows:
        cells = []
        for peer_name in contenders:
            entry = row["peers"].get(peer_name, {})
            if "error" in entry:
                cells.append("error")
            elif "step_s" in entry:
                mark = "" if entry.get("grads_ok", True) else " !"
                cells.append(f"{entry['step_s'] * 1e3:.1f}ms ({entry['speedup']:.2f}x){mark}")
            else:
                cells.append("-")
        lines.append(f"{row['model']:<24}" + "".join(f"{c:>22}" for c in cells))
    geo = {p: geomean([r["peers"].get(p, {}).get("speedup") for r in rows
                       if r["peers"].get(p, {}).get("grads_ok", True)]) for p in contenders}
    lines.append(f"{'geomean vs lazy':<24}" + "".join(
        f"{(f'{geo[p]:.2f}x' if geo[p] else '-'):>22}" for p in contenders))
    if "openxla" in peers and geo.get("openxla"):
        ours = geo.get("torchxla_trace_once")
        if ours:
            lines.append(f"trace_once vs openxla (geomean): {ours / geo['openxla']:.2f}x")
    lines.append("")
    lines.append("first step (s, of which XLA compile), saved activations (trace_once):")
    for row in rows:
        parts = []
        for peer_name in contenders:
            entry = row["peers"].get(peer_name, {})
            if "first_step_s" in entry:
                parts.append(f"{peer_name} {entry['first_step_s']:.1f} "
                             f"({entry['first_step_compile_s']:.1f})")
        saved = row["peers"].get("torchxla_trace_once", {}).get("saved_activation_bytes")
        saved_text = f"; saved {saved / 2**20:.1f} MiB" if saved else ""
        lines.append(f"  {row['model']}: " + ", ".join(parts) + saved_text)
        for peer_name in contenders:
            entry = row["peers"].get(peer_name, {})
            if entry.get("error"):
                lines.append(f"    {peer_name} error: {entry['error']}")
            elif entry.get("grads_ok") is False:
                lines.append(f"    {peer_name} gradients differ: {entry['grads_reason']}")
            for reason in entry.get("bridge_reasons", []):
                lines.append(f"    xla_bridge {reason}")
        lines.append(f"    XLA compiled during timed steps: "
                     f"{'yes' if row['compiles_during_timing'] else 'no'}; "
                     f"xla_bridge compiles during timed steps: "
                     f"{row['bridge_compiles_during_timing']}")
    if options.breakdown:
        lines.append("")
        lines.append("per-step breakdown (ms): " + ", ".join(PHASES))
        for row in rows:
            for peer_name in contenders:
                split = row["peers"].get(peer_name, {}).get("breakdown_s")
                if split:
                    lines.append(f"  {row['model']:<20} {peer_name:<20} " + "  ".join(
                        f"{phase} {split[phase] * 1e3:.1f}" for phase in PHASES))
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(directory, "results.json"), "w") as handle:
        json.dump({"rows": rows, "geomean": geo, "options": vars(options)}, handle, indent=1,
                  default=str)
    with open(os.path.join(directory, "speedups.csv"), "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["model", "peer", "step_ms", "speedup", "first_step_s",
                         "first_step_compile_s", "grads_ok", "saved_activation_bytes"])
        for row in rows:
            for peer_name in contenders:
                entry = row["peers"].get(peer_name, {})
                writer.writerow([row["model"], peer_name,
                                 entry.get("step_s", 0) * 1e3 if "step_s" in entry else "",
                                 entry.get("speedup", ""), entry.get("first_step_s", ""),
                                 entry.get("first_step_compile_s", ""),
                                 entry.get("grads_ok", ""),
                                 entry.get("saved_activation_bytes", "")])
    _plots(rows, contenders, geo, directory, options.breakdown)
    return text


def _plots(rows, contenders, geo, directory, breakdown):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = [r["model"] for r in rows] + ["geomean"]
    width = 0.8 / len(contenders)
    fig, ax = plt.subplots(figsize=(max(6, 1.5 * len(models)), 4))
    for k, peer_name in enumerate(contenders):
        values = [r["peers"].get(peer_name, {}).get("speedup") or 0 for r in rows]
        values.append(geo.get(peer_name) or 0)
        ax.bar([i + (k - (len(contenders) - 1) / 2) * width for i in range(len(models))],
               values, width, label=peer_name)
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xticks(range(len(models)))
    ax.set_xticklabels(models)
    ax.set_ylabel("training-step speedup vs XLA lazy")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(directory, "speedups.png"))
    plt.close(fig)
    if not breakdown:
        return
    labels, bottoms = [], []
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(rows) * len(contenders)), 4.5))
    bars = [(r["model"], p, r["peers"][p]["breakdown_s"]) for r in rows for p in contenders
            if r["peers"].get(p, {}).get("breakdown_s")]
    bottoms = [0.0] * len(bars)
    for phase in PHASES:
        values = [split[phase] * 1e3 for _, _, split in bars]
        ax.bar(range(len(bars)), values, bottom=bottoms, label=phase)
        bottoms = [b + v for b, v in zip(bottoms, values)]
    labels = [f"{model}\n{peer}" for model, peer, _ in bars]
    ax.set_xticks(range(len(bars)))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("ms per training step")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(directory, "breakdown.png"))
    plt.close(fig)


def main(argv=None):
    options = parse_args(argv)
    regime = REGIMES["small" if options.small else "standard"]
    peers = tuple(dict.fromkeys(options.peer or DEFAULT_PEERS))
    models = tuple(dict.fromkeys(options.only or DEFAULT_MODELS))
    rows = []
    for name in models:
        import minidynamo

        minidynamo.reset()
        rows.append(run_model(name, regime, options, peers))
    report(rows, peers, options, os.path.join(options.output, "training"))
    return 0
