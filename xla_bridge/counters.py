"""What the bridge did, counted: compiles, replays, traces, retraces, fallbacks, partitions and
decompositions, with reasons.

Read ``xla_bridge.counters`` after running a compiled function; ``reset_counters()`` zeroes it.
"""

from dataclasses import dataclass, field


@dataclass
class BridgeCounters:
    compiles: int = 0     # lazy graphs traced once, hashed and compiled (warm-up)
    replays: int = 0      # calls answered by `_run_cached_graph(hash, inputs)`: no tracing
    traces: int = 0       # lazy traces of a whole graph by `torchxla_trivial` (one per call)
    retraces: int = 0     # recaptures of a graph already compiled (evicted hash, new scalar input)
    fallbacks: int = 0    # graphs, segments or calls run eagerly instead of replayed
    partitions: int = 0   # graphs split into XLA segments and eager fallback ops
    decompositions: int = 0   # graphs kept one graph by tracing CPU-fallback ops decomposed
    reasons: list = field(default_factory=list)   # one readable line per retrace/fallback/partition
    # one dict per training plan made (trace_once in grad mode): saved_bytes, saved_count,
    # forward_ops, backward_ops, decomposed (ops recorded as their decomposition)
    training_plans: list = field(default_factory=list)

    def record(self, kind: str, reason: str) -> None:
        """Count one retrace/fallback/partition and keep its reason."""
        setattr(self, kind, getattr(self, kind) + 1)
        self.reasons.append(f"{kind[:-1] if kind.endswith('s') else kind}: {reason}")

    def as_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, list) else v) for k, v in vars(self).items()}

    def reset(self) -> None:
        for name, default in vars(BridgeCounters()).items():
            setattr(self, name, default)


counters = BridgeCounters()


def reset_counters() -> None:
    counters.reset()
