"""What a run found, per model, and the numbers derived from it (speedup, overhead, limit)."""

import dataclasses
import statistics

from bench import stats

MS = 1e3

# The peers whose calls end in ``_XLAC._run_cached_graph`` (see ``bench.own_time``).
REPLAYING_PEERS = ("torchxla_trace_once", "openxla_eval")


@dataclasses.dataclass
class ModelResult:
    """One model in one regime: every peer's run, the floor, and the optional breakdown."""

    model: str
    regime: str
    baseline: str
    runs: dict  # peer name -> measure.PeerRun
    floor_s: float = None  # transfer_in + execute + transfer_out of the lazy-mode graph (runner)
    floor_phases: dict = None
    breakdown: dict = None  # peer name -> {phase: seconds}
    diagnostics: dict = None  # counters of minidynamo and xla_bridge during the timing loop
    error: str = None  # the model could not be measured at all
    notes: list = dataclasses.field(default_factory=list)  # parts that could not be measured, why
    launch_s: float = None  # _run_cached_graph minus its XLA execution: the replaying peers' shared floor
    own_s: dict = dataclasses.field(default_factory=dict)  # peer -> seconds of its own code per call

    def median_s(self, peer):
        run = self.runs.get(peer)
        return stats.median(run.times_s) if run is not None and run.ok else None

    def speedup(self, peer):
        """Baseline median / peer median, or None when either is missing."""
        base, mine = self.median_s(self.baseline), self.median_s(peer)
        return base / mine if base and mine else None

    def speedup_spread(self, peer):
        """(25th, 75th percentile) of the per-iteration speedups baseline_i / peer_i: the peers ran
        in the same iteration, so each ratio saw the same machine noise. None if unknown."""
        base, run = self.runs.get(self.baseline), self.runs.get(peer)
        if base is None or run is None or not (base.ok and run.ok) or len(base.times_s) != len(run.times_s):
            return None
        ratios = sorted(b / p for b, p in zip(base.times_s, run.times_s))
        if len(ratios) < 4:
            return None
        quartiles = statistics.quantiles(ratios, n=4)
        return quartiles[0], quartiles[2]

    def correct(self, peer):
        run = self.runs.get(peer)
        return run is not None and run.ok and (run.accuracy is None or run.accuracy.ok)

    def counted_speedup(self, peer):
        """The speedup if the peer ran and was right; fast-but-wrong results do not count."""
        return self.speedup(peer) if self.correct(peer) else None

    def limit(self):
        """Best possible speedup: baseline median / floor."""
        base = self.median_s(self.baseline)
        return base / self.floor_s if base and self.floor_s else None

    def transfer_s(self):
        if not self.floor_phases:
            return None
        return self.floor_phases.get("transfer_in", 0.0) + self.floor_phases.get("transfer_out", 0.0)

    def overhead_s(self, peer):
        """Per-call overhead: median of (call - its XLA execution) minus the transfers."""
        run = self.runs.get(peer)
        transfer = self.transfer_s()
        if run is None or not run.ok or transfer is None or not any(run.execute_s):
            return None
        return stats.median(t - e for t, e in zip(run.times_s, run.execute_s)) - transfer

    def own_overhead_s(self, peer):
        """Per-call overhead less the shared runtime launch (``launch_s``), for the peers that
        replay through ``_run_cached_graph``: the part the implementation controls."""
        overhead = self.overhead_s(peer)
        if overhead is None or self.launch_s is None or peer not in REPLAYING_PEERS:
            return None
        return overhead - self.launch_s

    def execute_s(self, peer):
        run = self.runs.get(peer)
        if run is None or not run.ok or not any(run.execute_s):
            return None
        return stats.median(run.execute_s)


def geomean_speedup(results, peer):
    return stats.geomean([r.counted_speedup(peer) for r in results])


def geomean_limit(results):
    return stats.geomean([r.limit() for r in results])


def to_json(result):
    """A plain-data view of a ``ModelResult`` for results.json."""
    peers = {}
    for name, run in result.runs.items():
        peers[name] = {
            "median_ms": _ms(result.median_s(name)),
            "times_ms": [t * MS for t in run.times_s],
            "execute_ms": [e * MS for e in run.execute_s],
            "first_call_s": run.first_call_s,
            "first_call_compile_s": run.first_call_compile_s,
            "speedup": result.speedup(name) if name != result.baseline else 1.0,
            "speedup_quartiles": result.speedup_spread(name) if name != result.baseline else None,
            "overhead_ms": _ms(result.overhead_s(name)),
            "own_overhead_ms": _ms(result.own_overhead_s(name)),
            "own_us_stand_in": None if name not in result.own_s else result.own_s[name] * 1e6,
            "accuracy_ok": None if run.accuracy is None else run.accuracy.ok,
            "max_abs_error": None if run.accuracy is None else run.accuracy.max_abs_error,
            "accuracy_reason": None if run.accuracy is None else run.accuracy.reason,
            "error": run.error,
        }
    return {
        "model": result.model,
        "regime": result.regime,
        "baseline": result.baseline,
        "error": result.error,
        "notes": result.notes,
        "floor_ms": _ms(result.floor_s),
        "launch_ms": _ms(result.launch_s),
        "floor_phases_ms": {k: v * MS for k, v in (result.floor_phases or {}).items()},
        "limit": result.limit(),
        "peers": peers,
        "diagnostics": result.diagnostics,
        "breakdown_ms": {
            peer: {k: (v * MS if isinstance(v, float) else v) for k, v in phases.items()}
            for peer, phases in (result.breakdown or {}).items()
        },
    }


def _ms(seconds):
    return None if seconds is None else seconds * MS
