"""PNG charts: speedups per model (with the limit), and the stacked per-call breakdown."""

import os

from bench import results
from bench.peers import PHASES
from bench.results import MS


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    return plt


def speedup_chart(path, options, regime, results_list):
    plt = _pyplot()
    from bench.report import TITLES

    models = [r.model for r in results_list] + ["geomean"]
    contenders = list(options.contenders)
    width = 0.8 / max(1, len(contenders))
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(models)), 4.5))
    for k, peer in enumerate(contenders):
        values = [r.speedup(peer) or 0.0 for r in results_list]
        values.append(results.geomean_speedup(results_list, peer) or 0.0)
        xs = [i + (k - (len(contenders) - 1) / 2) * width for i in range(len(models))]
        bars = ax.bar(xs, values, width, label=TITLES[peer])
        for bar, r in zip(bars, results_list):
            if r.speedup(peer) is not None and not r.correct(peer):
                bar.set_hatch("//")  # fast but wrong
    limits = [r.limit() for r in results_list] + [results.geomean_limit(results_list)]
    ax.scatter([i for i, v in enumerate(limits) if v], [v for v in limits if v],
               marker="_", s=900, color="black", label="limit", zorder=3)
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xticks(range(len(models)))
    ax.set_xticklabels(models, rotation=30, ha="right")
    ax.set_ylabel(f"speedup over {TITLES[options.baseline]}")
    ax.set_title(f"minidynamo speedups, {regime} regime (hatched: outputs differ)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def breakdown_chart(path, regime, results_list):
    """Two panels of stacked bars, one bar per (model, peer): the whole call, and the call
    without XLA execution (the overhead a capture system can remove, drawn to its own scale)."""
    plt = _pyplot()
    from bench.report import TITLES

    bars = [(r.model, peer, phases) for r in results_list for peer, phases in (r.breakdown or {}).items()]
    if not bars:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(max(8, 1.2 * len(bars)), 5.5))
    for ax, phases_shown, title in (
        (axes[0], PHASES, "whole call"),
        (axes[1], [p for p in PHASES if p != "execute"], "without XLA execution"),
    ):
        bottoms = [0.0] * len(bars)
        for phase in phases_shown:
            heights = [phases.get(phase, 0.0) * MS for _, _, phases in bars]
            ax.bar(range(len(bars)), heights, bottom=bottoms, label=phase,
                   color=PHASE_COLORS[PHASES.index(phase)])
            bottoms = [b + h for b, h in zip(bottoms, heights)]
        ax.set_xticks(range(len(bars)))
        ax.set_xticklabels([f"{m}\n{TITLES[p]}" for m, p, _ in bars], rotation=60, ha="right", fontsize=7)
        ax.set_ylabel("ms per call (median of each phase)")
        ax.set_title(title, fontsize=10)
    handles, labels = axes[0].get_legend_handles_labels()  # the left panel has every phase
    axes[1].legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle(f"Where a call's time goes, {regime} regime")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# One colour per phase, the same in both panels.
PHASE_COLORS = ("#1f77b4", "#aec7e8", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#7f7f7f")


def write_plots(directory, options, regime, results_list):
    """Write the charts that have data; return their paths."""
    paths = []
    measured = [r for r in results_list if not r.error]
    if measured and options.mode == "performance":
        path = os.path.join(directory, "speedups.png")
        speedup_chart(path, options, regime, measured)
        paths.append(path)
    path = os.path.join(directory, "breakdown.png")
    if breakdown_chart(path, regime, measured):
        paths.append(path)
    return paths
