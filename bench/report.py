"""Tables for the terminal (the seed's grid format), CSV and JSON files.

    +------------+--------------------+-------------------------+
    | Model      |   XLA (trace once) |   XLA (trace everytime) |
    +============+====================+=========================+
    | resnet18   |              1.346 |                   1.045 |
"""

import csv
import json
import os

from bench import accuracy, results
from bench.peers import PHASES
from bench.results import MS

WRONG = "!"  # marks a speedup whose outputs differ from the baseline's

# How a peer is titled in the tables.
TITLES = {
    "eager_cpu": "eager (CPU)",
    "xla_lazy": "XLA lazy (trace everytime)",
    "eager": "minidynamo eager",
    "torchxla_trivial": "XLA (trivial)",
    "torchxla_trace_once": "XLA (trace once)",
    "openxla_eval": "openxla_eval",
}


def grid(headers, rows):
    """A grid table: text left-aligned, numbers right-aligned, ``=`` under the header."""
    cells = [[str(c) for c in headers]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    numeric = [all(_numeric(row[i]) for row in cells[1:] if row[i]) and i > 0 for i in range(len(headers))]

    def line(char):
        return "+" + "+".join(char * (w + 2) for w in widths) + "+"

    def render(row):
        return "| " + " | ".join(c.rjust(w) if num else c.ljust(w)
                                 for c, w, num in zip(row, widths, numeric)) + " |"

    out = [line("-"), render(cells[0]), line("=")]
    for row in cells[1:]:
        out += [render(row), line("-")]
    return "\n".join(out)


def _numeric(text):
    text = text.split(" ±")[0].rstrip("x" + WRONG).strip()
    try:
        float(text)
        return True
    except ValueError:
        return text in ("-", "error")


def _speedup_cell(result, peer):
    run = result.runs.get(peer)
    if run is None:
        return "-"
    if not run.ok:
        return "error"
    text = f"{result.speedup(peer):.3f}" + ("" if result.correct(peer) else WRONG)
    spread = result.speedup_spread(peer)
    return text if spread is None else f"{text} ±{(spread[1] - spread[0]) / 2:.2f}"


def _fmt(value, digits=3, scale=1.0):
    return "-" if value is None else f"{value * scale:.{digits}f}"


def header(options, regime):
    """What the numbers mean, printed above the tables."""
    from bench.models import REGIMES

    r = REGIMES[regime]
    inputs = "fresh random inputs each iteration" if options.randomize_input else "the same inputs each iteration"
    if options.mode == "accuracy":
        runs = f"accuracy only: {min(options.iterations, 3)} calls per peer after the first"
    else:
        runs = f"median of {options.iterations} interleaved iterations after {options.warmup} warm-up"
    return "\n".join([
        f"Regime {regime}: {r.image_size}x{r.image_size} images (alexnet at least 64), BERT sequence "
        f"{r.seq_len}, batch {options.batch_size}; {runs}; {inputs}.",
        f"Baseline: {TITLES[options.baseline]}. Every call takes CPU inputs (freshly allocated for each call) "
        "and returns CPU outputs: on XLA it includes moving the inputs to the device, the forward, and the "
        "results back; every XLA peer keeps its model on the device.",
        f"Speedup = baseline median / peer median, ± half the interquartile range of the per-iteration "
        f"ratios (the noise); {WRONG} = outputs differ from the baseline "
        f"({accuracy.TOLERANCE_TEXT}): shown, not counted in the geomean.",
        "limit = baseline / (transfer in + XLA execution + transfer out of the lazy-mode graph; execution: the "
        "smallest median of the peers running that graph): the bound for replaying that graph (openxla_eval "
        "compiles its own graph, whose execution may differ).",
    ])


def speedup_table(results_list, contenders):
    rows = []
    for r in results_list:
        if r.error:
            rows.append([r.model, "error"] + ["-"] * len(contenders) + ["-"])
            continue
        rows.append([r.model, _fmt(r.median_s(r.baseline), 2, MS)]
                    + [_speedup_cell(r, p) for p in contenders] + [_fmt(r.limit())])
    rows.append(["geomean", ""] + [_fmt(results.geomean_speedup(results_list, p)) for p in contenders]
                + [_fmt(results.geomean_limit(results_list))])
    return grid(["Model", "baseline ms"] + [TITLES[p] for p in contenders] + ["limit"], rows)


def overhead_table(results_list, contenders):
    """Per XLA peer: median XLA execution and per-call overhead (call - execution - transfers), ms."""
    peers = [p for p in dict.fromkeys((results_list[0].baseline,) + tuple(contenders))
             if any(r.overhead_s(p) is not None for r in results_list)]
    rows = []
    for r in results_list:
        row = [r.model, _fmt(r.transfer_s(), 2, MS), _fmt(r.launch_s, 3, MS)]
        for p in peers:
            row += [_fmt(r.execute_s(p), 2, MS), _fmt(r.overhead_s(p), 2, MS)]
            if p in results.REPLAYING_PEERS:
                row.append(_fmt(r.own_overhead_s(p), 2, MS))
        rows.append(row)
    headers = ["Model", "transfers ms", "launch ms"]
    for p in peers:
        headers += [f"{p} exec ms", f"{p} overhead ms"]
        if p in results.REPLAYING_PEERS:
            headers.append(f"{p} own ms")
    return grid(headers, rows)


def own_time_table(results_list):
    """Per model: each replaying peer's own time per call (us), and ours / the reference's."""
    peers = [p for p in results.REPLAYING_PEERS if any(p in r.own_s for r in results_list)]
    rows = []
    for r in results_list:
        row = [r.model] + [_fmt(r.own_s.get(p), 1, 1e6) for p in peers]
        mine, reference = r.own_s.get(GOAL_PEER), r.own_s.get(REFERENCE_PEER)
        row.append(_fmt(mine / reference if mine and reference else None, 3))
        rows.append(row)
    return grid(["Model"] + [f"{TITLES[p]} us" for p in peers] + ["ratio"], rows)


def first_call_table(results_list, contenders):
    """Seconds of each peer's first call: capture + compile + one run."""
    peers = (results_list[0].baseline,) + tuple(p for p in contenders if p != results_list[0].baseline)
    rows = [[r.model] + [_first_call_cell(r.runs.get(p)) for p in peers] for r in results_list]
    return grid(["1st call s"] + [TITLES[p] for p in peers], rows)


def _first_call_cell(run):
    if run is None or run.first_call_s is None:
        return "-"
    if run.first_call_compile_s is None:
        return f"{run.first_call_s:.2f}"
    rest = run.first_call_s - run.first_call_compile_s
    return f"{run.first_call_s:.2f} (XLA compile {run.first_call_compile_s:.2f}, rest {rest:.2f})"


def breakdown_table(results_list):
    rows = []
    for r in results_list:
        for peer, phases in (r.breakdown or {}).items():
            rows.append([r.model, TITLES[peer]] + [_fmt(phases.get(p), 3, MS) for p in PHASES]
                        + [_fmt(phases.get("total"), 3, MS), _fmt(r.own_s.get(peer), 1, 1e6)])
    return grid(["Model", "peer"] + [f"{p} ms" for p in PHASES] + ["total ms", "own us"], rows)


def accuracy_table(results_list, contenders):
    rows = []
    for r in results_list:
        for peer in contenders:
            run = r.runs.get(peer)
            if run is None:
                continue
            if run.error:
                rows.append([r.model, TITLES[peer], "error", "-", run.error])
            elif run.accuracy is not None:
                rows.append([r.model, TITLES[peer], "pass" if run.accuracy.ok else "FAIL",
                             f"{run.accuracy.max_abs_error:.3g}", run.accuracy.reason])
    return grid(["Model", "peer", "accuracy", "max abs error", "reason"], rows)


def write_csv(path, results_list):
    """One row per (model, peer)."""
    fields = ["regime", "model", "peer", "median_ms", "speedup", "speedup_q1", "speedup_q3", "counted", "first_call_s",
              "overhead_ms", "execute_ms", "floor_ms", "limit", "accuracy_ok", "max_abs_error", "error"]
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for r in results_list:
            for peer, run in r.runs.items():
                writer.writerow({
                    "regime": r.regime, "model": r.model, "peer": peer,
                    "median_ms": _fmt(r.median_s(peer), 4, MS),
                    "speedup": _fmt(r.speedup(peer), 4),
                    "speedup_q1": _fmt((r.speedup_spread(peer) or (None,))[0], 4),
                    "speedup_q3": _fmt((r.speedup_spread(peer) or (None, None))[1], 4),
                    "counted": r.counted_speedup(peer) is not None,
                    "first_call_s": _fmt(run.first_call_s, 4),
                    "overhead_ms": _fmt(r.overhead_s(peer), 4, MS),
                    "execute_ms": _fmt(r.execute_s(peer), 4, MS),
                    "floor_ms": _fmt(r.floor_s, 4, MS),
                    "limit": _fmt(r.limit(), 4),
                    "accuracy_ok": "" if run.accuracy is None else run.accuracy.ok,
                    "max_abs_error": "" if run.accuracy is None else f"{run.accuracy.max_abs_error:.4g}",
                    "error": run.error or r.error or "",
                })


def write_json(path, options, regime, results_list):
    import dataclasses

    data = {
        "options": dataclasses.asdict(options),
        "regime": regime,
        "tolerance": accuracy.TOLERANCE_TEXT,
        "geomean_speedup": {p: results.geomean_speedup(results_list, p) for p in options.contenders},
        "geomean_limit": results.geomean_limit(results_list),
        "models": [results.to_json(r) for r in results_list],
    }
    with open(path, "w") as f:
        json.dump(data, f, indent=2, default=str)


def write_all(directory, options, regime, results_list):
    """CSV, JSON and the PNG charts of one regime into ``directory``; returns the paths."""
    from bench import plots

    os.makedirs(directory, exist_ok=True)
    paths = [os.path.join(directory, "speedups.csv"), os.path.join(directory, "results.json")]
    write_csv(paths[0], results_list)
    write_json(paths[1], options, regime, results_list)
    paths += plots.write_plots(directory, options, regime, results_list)
    return paths


# The targets for trace_once, checked against the reference peer of the same run.
GOAL_PEER, REFERENCE_PEER = "torchxla_trace_once", "openxla_eval"


def goals(results_list, options):
    """Lines saying whether trace_once met its targets in this run, or None when it cannot tell."""
    if GOAL_PEER not in options.contenders or not options.use_xla_baseline:
        return None
    mine = results.geomean_speedup(results_list, GOAL_PEER)
    limit = results.geomean_limit(results_list)
    lines = [f"Goals ({TITLES[GOAL_PEER]} over the XLA baseline):"]

    def verdict(ok):
        return "met" if ok else "NOT met"

    if mine is not None and limit is not None:
        lines.append(f"  geomean {mine:.3f} >= 99% of the limit {limit:.3f}: {verdict(mine >= 0.99 * limit)}")
    if REFERENCE_PEER in options.contenders:
        reference = results.geomean_speedup(results_list, REFERENCE_PEER)
        if mine is not None and reference is not None:
            lines.append(f"  geomean {mine:.3f} >= {REFERENCE_PEER}'s {reference:.3f}: {verdict(mine >= reference)}")
        pairs = [(r.model, r.overhead_s(GOAL_PEER), r.overhead_s(REFERENCE_PEER)) for r in results_list]
        pairs = [(m, a, b) for m, a, b in pairs if a is not None and b is not None]
        if pairs:
            held = [m for m, a, b in pairs if a <= 0.5 * b]
            lines.append(f"  per-call overhead <= half of {REFERENCE_PEER}'s: {verdict(len(held) == len(pairs))} "
                         f"on {len(held)}/{len(pairs)} models"
                         + ("" if len(held) == len(pairs) else
                            f" (not on {', '.join(m for m, _, _ in pairs if m not in held)})"))
    if len(lines) == 1:
        return None
    lines.append("  (a verdict decided by less than the ± spreads of the speedup table is noise)")
    return "\n".join(lines)
