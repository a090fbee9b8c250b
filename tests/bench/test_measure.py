import torch

from bench.measure import measure


class Recorder:
    """A fake peer: returns ``fn(inputs)`` and logs the order of calls in ``log``."""

    uses_xla = False

    def __init__(self, name, log, fn=lambda inputs: inputs[0] * 2):
        self.name, self.log, self.fn = name, log, fn

    def __call__(self, inputs):
        self.log.append(self.name)
        return self.fn(inputs)


def steps(step):
    return (torch.full((2,), float(step)),)


def test_every_peer_is_timed_every_iteration_in_rotating_order():
    log = []
    peers = {name: Recorder(name, log) for name in ("base", "a", "b")}
    runs = measure(peers, "base", steps, iterations=3, warmup=1)
    assert all(len(run.times_s) == 3 and run.first_call_s is not None for run in runs.values())
    timed = log[6:]  # after the first calls and one warm-up round
    assert timed == ["base", "a", "b", "a", "b", "base", "b", "base", "a"]
    assert runs["a"].accuracy.ok and runs["base"].accuracy is None


def test_a_peer_that_serves_a_stale_result_is_caught_with_fresh_inputs():
    log = []
    first = {}

    def stale(inputs):  # answers every call with its first answer
        return first.setdefault("out", inputs[0] * 2)

    runs = measure({"base": Recorder("base", log), "cached": Recorder("cached", log, stale)},
                   "base", steps, iterations=2, warmup=0)
    assert not runs["cached"].accuracy.ok
    assert runs["cached"].ok  # it ran: marked wrong, not dropped


def test_a_failing_peer_is_dropped_with_its_reason_and_the_others_go_on():
    log = []

    def broken(inputs):
        raise RuntimeError("no lowering for aten::foo\nmore detail")

    runs = measure({"base": Recorder("base", log), "bad": Recorder("bad", log, broken),
                    "good": Recorder("good", log)}, "base", steps, iterations=2, warmup=1)
    assert runs["bad"].error == "RuntimeError: no lowering for aten::foo"
    assert not runs["bad"].ok and runs["bad"].times_s == []
    assert len(runs["good"].times_s) == 2


def test_the_baseline_failing_ends_the_run():
    import pytest

    def broken(inputs):
        raise ValueError("boom")

    with pytest.raises(ValueError):
        measure({"base": Recorder("base", [], broken)}, "base", steps, iterations=1, warmup=0)


def test_progress_ticks_once_per_warmup_and_timed_iteration():
    ticks = []
    measure({"base": Recorder("base", [])}, "base", steps, iterations=3, warmup=2,
            on_iteration=lambda: ticks.append(1))
    assert len(ticks) == 5


def test_every_call_gets_fresh_input_tensors_with_the_same_values():
    """No peer may recognise an input it has copied before: each call gets new tensors."""
    seen = []

    def record(inputs):
        seen.append((id(inputs[0]), inputs[0].untyped_storage().data_ptr(), inputs[0].clone()))
        return inputs[0] * 2

    fixed = (torch.arange(4.0),)
    keep = []  # keep every input alive, so ids and addresses cannot be reused

    def remember(inputs):
        keep.append(inputs)
        return record(inputs)

    measure({"base": Recorder("base", [], remember), "other": Recorder("other", [], remember)},
            "base", lambda step: fixed, iterations=3, warmup=1)
    assert len(seen) == 2 * (1 + 1 + 3)
    assert len({s[0] for s in seen}) == len(seen) and len({s[1] for s in seen}) == len(seen)
    assert all(torch.equal(s[2], fixed[0]) for s in seen)
    assert all(t is not fixed[0] for (t,) in keep)
