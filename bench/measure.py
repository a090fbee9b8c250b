"""The interleaved timing loop: every peer once per iteration, in rotating order.

Interleaving makes the noise of a shared machine (other processes, frequency changes) hit every
peer alike; rotating the order keeps any peer from always running right after another (cache
warmth). Each timed call's XLA execution time is read from the runtime metrics outside the
timed window, so per-call overhead (call minus execution and transfer) is known for every peer.
Every output is compared with the baseline's output for the same inputs, so a peer that serves
a stale or wrong result is caught, not just timed.

Every call gets freshly allocated input tensors (``fresh_copy``, made before the clock starts,
for every peer alike): the same values when inputs are not randomized, but never a tensor the
peer has seen before, so no peer can skip the input copy by recognising its input (a cache keyed
by tensor identity, ``_version`` or data pointer), and every peer pays the same copies.
"""

import dataclasses
import gc
import time

from bench import xla_probe
from bench.accuracy import Comparison, compare


@dataclasses.dataclass
class PeerRun:
    """What one peer did on one model."""

    name: str
    first_call_s: float = None  # the first call: capture + compile (+ the run itself)
    first_call_compile_s: float = None  # of which XLA compilation (0: a compile-cache hit)
    times_s: list = dataclasses.field(default_factory=list)
    execute_s: list = dataclasses.field(default_factory=list)  # XLA execution inside each timed call
    accuracy: Comparison = None  # worst comparison with the baseline; None for the baseline
    error: str = None  # why the peer stopped, if it did

    @property
    def ok(self):
        return self.error is None and bool(self.times_s)


def describe(error):
    """One readable line for an exception."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:300]


def fresh_copy(inputs):
    """The same values in newly allocated tensors (a nested tuple/list/dict of them)."""
    return xla_probe.map_tensors(inputs, lambda t: t.clone())


class _Clock:
    """Times one call and the XLA execution inside it."""

    def __init__(self, reads_xla):
        self.reads_xla = reads_xla

    def call(self, peer, inputs):
        executed = xla_probe.execute_ns() if self.reads_xla else 0
        start = time.perf_counter()
        outputs = peer(inputs)
        elapsed = time.perf_counter() - start
        if not self.reads_xla:
            return outputs, elapsed, 0.0
        # The runtime records a graph's ExecuteTime from its worker thread, sometimes after the
        # results reached the caller: wait (outside the timed window) so it lands in this call.
        xla_probe.wait_device()
        execute = (xla_probe.execute_ns() - executed) / 1e9
        return outputs, elapsed, execute


def measure(peers, baseline, inputs_at, iterations, warmup, on_iteration=None):
    """Run ``peers`` (name -> callable, the baseline among them) and return name -> ``PeerRun``.

    ``inputs_at(i)`` gives the inputs of step ``i`` (first call and warm-up use steps
    ``0..warmup``, timed iterations the ones after). A peer that raises is dropped with its reason;
    the baseline raising ends the model's run (nothing to compare with).
    """
    clock = _Clock(reads_xla=any(getattr(p, "uses_xla", False) for p in peers.values()))
    runs = {name: PeerRun(name) for name in peers}
    live = dict(peers)

    def call(name, inputs):
        inputs = fresh_copy(inputs)  # outside the timed window, for every peer alike
        try:
            return clock.call(live[name], inputs)
        except Exception as error:  # a peer failing is a result, not a crash of the harness
            if name == baseline:
                raise
            runs[name].error = describe(error)
            del live[name]
            return None

    order = [baseline] + [name for name in peers if name != baseline]
    for name in order:  # first calls: capture and compile
        compiled = xla_probe.compile_ns() if clock.reads_xla else 0
        done = call(name, inputs_at(0))
        if done is not None:
            runs[name].first_call_s = done[1]
            if getattr(peers[name], "uses_xla", False):
                runs[name].first_call_compile_s = (xla_probe.compile_ns() - compiled) / 1e9
    for step in range(warmup):
        for name in [n for n in order if n in live]:
            call(name, inputs_at(step))
        _tick(on_iteration)

    gc.collect()
    for i in range(iterations):
        inputs = inputs_at(warmup + i)
        names = [n for n in order if n in live]
        names = names[i % len(names):] + names[: i % len(names)]
        outputs = {}
        gc.disable()
        try:
            for name in names:
                done = call(name, inputs)
                if done is not None:
                    outputs[name] = done[0]
                    runs[name].times_s.append(done[1])
                    runs[name].execute_s.append(done[2])
        finally:
            gc.enable()
        _check(runs, outputs, baseline)
        _tick(on_iteration)
    return runs


def _check(runs, outputs, baseline):
    ref = outputs[baseline]
    for name, got in outputs.items():
        if name != baseline:
            comparison = compare(ref, got)
            previous = runs[name].accuracy
            runs[name].accuracy = comparison if previous is None else previous.worst(comparison)


def _tick(on_iteration):
    if on_iteration is not None:
        on_iteration()
