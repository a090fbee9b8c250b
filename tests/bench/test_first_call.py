"""bench.first_call: every peer's first call split into parts that add up to its total, and
the tables have a row per model and a column per peer. No timing is asserted."""

import pytest

from bench import first_call


@pytest.mark.parametrize("peer", first_call.PEERS)
def test_the_parts_of_a_first_call_add_up_to_its_total(tiny_model, peer):
    got = first_call.first_call(tiny_model, "small", peer, seed=3)
    assert set(got) == set(first_call.PARTS) | {"total", "execute"}
    assert got["total"] > 0
    assert sum(got[p] for p in first_call.PARTS) == pytest.approx(got["total"], abs=1e-6)
    assert all(got[p] >= 0 for p in ("trace", "guards", "backend", "compile", "execute"))
    if peer == "torchxla_trace_once":      # our instruments saw our tracer, guards and backend
        assert got["trace"] > 0 and got["guards"] > 0 and got["backend"] > 0
    if peer == "openxla_eval":
        assert got["backend"] > 0


def test_the_tables_have_a_row_per_model_and_a_verdict():
    parts = {p: 0.1 for p in first_call.PARTS} | {"execute": 0.05}
    ours = parts | {"total": 0.6}
    theirs = parts | {"total": 1.2}
    text = first_call.tables("small", {
        "m1": {"xla_lazy": ours, "torchxla_trace_once": ours, "openxla_eval": theirs},
        "m2": {"xla_lazy": ours, "torchxla_trace_once": theirs, "openxla_eval": {"error": "boom"}},
    })
    totals, detail = text.split("Parts of the first call")
    assert "XLA (trace once)" in totals and "openxla_eval" in totals and "XLA lazy" in totals
    assert "yes (0.50x)" in totals                # m1: ours <= openxla_eval
    assert "yes (0.45x)" in totals                # the same less XLA compile: 0.5 / 1.1
    assert "error" in totals.split("m2")[1]       # m2's openxla_eval failed: said, not hidden
    assert all(part in detail for part in first_call.PARTS)
    assert detail.count("m1") == 2 and detail.count("m2") == 1   # ours + openxla_eval; ours only


def test_a_child_that_fails_is_reported_not_raised():
    got = first_call.run_child("no_such_model", "small", "xla_lazy", seed=0, timeout=120)
    assert "error" in got


def test_of_several_runs_the_fastest_is_kept():
    assert first_call.fastest([{"total": 2.0}, {"error": "x"}, {"total": 1.0}]) == {"total": 1.0}
    assert first_call.fastest([{"error": "x"}]) == {"error": "x"}
