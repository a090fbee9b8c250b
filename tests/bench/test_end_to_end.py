"""A tiny model through the whole harness: peers, loop, report, files."""

import csv

from bench import report
from bench.runner import Progress, run_model

from .conftest import options_for


def test_tiny_model_with_the_eager_backend(tiny_model, tmp_path, capsys):
    options = options_for("--backend", "eager", "--iterations", "3", "--warmup", "1", "--small",
                          "--randomize-input", "--output", str(tmp_path), models=(tiny_model,))
    result = run_model(options, tiny_model, "small", Progress(0, enabled=False))
    assert result.error is None
    assert set(result.runs) == {"eager_cpu", "eager"}
    run = result.runs["eager"]
    assert run.ok and len(run.times_s) == 3 and run.first_call_s > 0
    assert run.accuracy.ok and run.accuracy.max_abs_error == 0.0  # same math on the same CPU
    assert result.speedup("eager") > 0
    assert result.floor_s is None  # no XLA peer, no floor

    paths = report.write_all(str(tmp_path / "small"), options, "small", [result])
    rows = list(csv.DictReader(open(tmp_path / "small" / "speedups.csv")))
    assert [r["peer"] for r in rows] == ["eager_cpu", "eager"]
    assert any(p.endswith("speedups.png") for p in paths)


def test_main_prints_the_tables_and_writes_the_files(tiny_model, tmp_path, capsys, monkeypatch):
    from bench import options as options_module
    from bench import runner

    monkeypatch.setattr(options_module, "DEFAULT_MODELS", (tiny_model,))
    assert runner.main(["--backend", "eager", "--iterations", "2", "--warmup", "0", "--small",
                        "--no-progress", "--output", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| tiny " in out and "| geomean " in out and "minidynamo eager" in out
    assert (tmp_path / "small" / "results.json").exists()


def test_a_model_that_cannot_be_built_is_reported_not_raised(monkeypatch, tmp_path):
    from bench import models

    def broken(_regime):
        raise ImportError("no module named somewhere")

    monkeypatch.setitem(models.MODELS, "broken", models.ModelSpec("broken", broken, models._images))
    options = options_for("--backend", "eager", "--iterations", "1", models=("broken",))
    result = run_model(options, "broken", "small", Progress(0, enabled=False))
    assert result.error == "ImportError: no module named somewhere"
    assert "error" in report.speedup_table([result], options.contenders)


def test_fallbacks_and_retraces_are_reported():
    from bench.runner import warnings_of

    found = {"xla_bridge": {"compiles": 1, "retraces": 2, "fallbacks": 0, "reasons": ["retrace: new scalar"]},
             "minidynamo": {"fallbacks": 0, "recompiles": 0, "fallback_reasons": []}}
    assert warnings_of(found) == ["xla_bridge retraces=2", "xla_bridge: retrace: new scalar"]


def test_tiny_model_on_xla_lazy_mode_and_openxla_eval_with_the_breakdown(tiny_model, tmp_path):
    """The XLA side of the harness: lazy baseline, the torch.compile peer, floor, breakdown."""
    options = options_for("--use-xla-baseline", "--peers", "openxla_eval", "--backend", "eager",
                          "--iterations", "3", "--warmup", "1", "--small", "--breakdown", models=(tiny_model,))
    result = run_model(options, tiny_model, "small", Progress(0, enabled=False))
    assert result.error is None and result.notes == []
    reference = result.runs["openxla_eval"]
    assert reference.ok and reference.accuracy.ok
    assert all(e > 0 for e in result.runs["xla_lazy"].execute_s)  # the runtime metric was read
    assert result.runs["xla_lazy"].first_call_compile_s > 0  # the baseline compiles first
    assert "XLA compile" in report.first_call_table([result], options.contenders)
    assert set(result.floor_phases) == {"transfer_in", "execute", "transfer_out"}
    assert result.limit() > 0
    lazy, compiled = result.breakdown["xla_lazy"], result.breakdown["openxla_eval"]
    assert lazy["trace"] > 0 and compiled["trace"] == 0.0  # lazy mode retraces, dynamo does not
    assert compiled["guard"] > 0 and "note" not in compiled
    assert "eager" not in result.breakdown  # CPU peers have no device phases
    paths = report.write_all(str(tmp_path), options, "small", [result])
    assert any(p.endswith("breakdown.png") for p in paths)


def test_accuracy_mode_compares_without_timing_tables(tiny_model, tmp_path, capsys, monkeypatch):
    from bench import options as options_module
    from bench import runner

    monkeypatch.setattr(options_module, "DEFAULT_MODELS", (tiny_model,))
    assert runner.main(["--accuracy", "--backend", "eager", "--no-progress", "--output", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "accuracy only" in out and "| pass " in out
    assert "| geomean " not in out  # no speedup table
    assert not (tmp_path / "standard" / "speedups.png").exists()


def test_randomized_inputs_change_values_not_shapes(tiny_model):
    from bench.models import REGIMES
    from bench.runner import input_source

    fresh = input_source(tiny_model, REGIMES["small"], options_for("--randomize-input"))
    a, b = fresh(0)[0], fresh(1)[0]
    assert a.shape == b.shape and not a.equal(b)
    assert fresh(1)[0].equal(b)  # deterministic: step i always draws the same values
    fixed = input_source(tiny_model, REGIMES["small"], options_for())
    assert fixed(0) is fixed(5)


def test_own_time_and_the_shared_launch_floor_of_the_replaying_peers(tiny_model):
    """Both replaying peers get their own time per call (runtime stood in for) and the launch
    floor they share; the tables show them; the runtime function is restored afterwards."""
    import torch_xla

    real = torch_xla._XLAC._run_cached_graph
    options = options_for("--use-xla-baseline", "--peers", "openxla_eval", "--backend", "torchxla_trace_once",
                          "--iterations", "3", "--warmup", "1", "--small", "--breakdown", models=(tiny_model,))
    result = run_model(options, tiny_model, "small", Progress(0, enabled=False))
    assert result.error is None and result.notes == []
    assert torch_xla._XLAC._run_cached_graph is real
    assert result.launch_s > 0
    assert set(result.own_s) == {"torchxla_trace_once", "openxla_eval"}
    assert all(seconds > 0 for seconds in result.own_s.values())
    assert result.runs["torchxla_trace_once"].accuracy.ok
    overhead = report.overhead_table([result], options.contenders)
    assert "launch ms" in overhead and "torchxla_trace_once own ms" in overhead
    assert "XLA (trace once) us" in report.own_time_table([result])
    assert "own us" in report.breakdown_table([result])
    assert "rest" in report.first_call_table([result], options.contenders)
