import csv
import json

import pytest
import torch

from bench import report
from bench.accuracy import compare
from bench.results import geomean_speedup

from .conftest import fake_result, options_for


def two_models():
    wrong = compare(torch.zeros(1), torch.ones(1))
    return [
        fake_result("resnet18", {"xla_lazy": [0.040, 0.040], "torchxla_trace_once": [0.020, 0.020],
                                 "openxla_eval": [0.040, 0.050]}, floor_s=0.010),
        fake_result("vgg16", {"xla_lazy": [0.090], "torchxla_trace_once": [0.010], "openxla_eval": [0.045]},
                    accuracy={"torchxla_trace_once": wrong}),
    ]


def test_speedups_and_geomean_leave_out_wrong_results():
    results_list = two_models()
    assert results_list[0].speedup("torchxla_trace_once") == 2.0
    assert results_list[1].speedup("torchxla_trace_once") == 9.0  # fast ...
    assert geomean_speedup(results_list, "torchxla_trace_once") == 2.0  # ... but wrong: not counted
    assert results_list[0].limit() == 4.0


def test_grid_table_in_the_seed_format():
    table = report.grid(["Model", "XLA (trace once)"], [["resnet18", "1.346"], ["geomean", "1.5"]])
    lines = table.splitlines()
    assert lines[0] == "+----------+------------------+"
    assert lines[1] == "| Model    | XLA (trace once) |"
    assert lines[2] == "+==========+==================+"
    assert lines[3] == "| resnet18 |            1.346 |"  # numbers right-aligned
    assert len({len(line) for line in lines}) == 1


def test_speedup_table_marks_wrong_results_and_has_a_geomean_row():
    table = report.speedup_table(two_models(), ("torchxla_trace_once", "openxla_eval"))
    assert "9.000!" in table
    assert "| geomean " in table
    vgg_row = next(line for line in table.splitlines() if "vgg16" in line)
    assert "2.000" in vgg_row  # openxla_eval on vgg16: 0.090 / 0.045


def test_csv_json_and_png_files(tmp_path):
    options = options_for("--use-xla-baseline", "--peers", "openxla_eval", "--backend", "torchxla_trace_once",
                          "--small")
    paths = report.write_all(str(tmp_path), options, "small", two_models())
    assert sorted(p.rsplit("/", 1)[1] for p in paths) == ["results.json", "speedups.csv", "speedups.png"]
    rows = list(csv.DictReader(open(tmp_path / "speedups.csv")))
    trace_once = {r["model"]: r for r in rows if r["peer"] == "torchxla_trace_once"}
    assert trace_once["resnet18"]["speedup"] == "2.0000"
    assert trace_once["vgg16"]["counted"] == "False"
    data = json.load(open(tmp_path / "results.json"))
    assert data["geomean_speedup"]["torchxla_trace_once"] == 2.0
    assert data["models"][1]["peers"]["torchxla_trace_once"]["accuracy_ok"] is False
    assert (tmp_path / "speedups.png").read_bytes()[:4] == b"\x89PNG"


def test_breakdown_table_and_stacked_chart(tmp_path):
    results_list = two_models()
    results_list[0].breakdown = {
        "xla_lazy": {"trace": 0.002, "execute": 0.030, "total": 0.040},
        "torchxla_trace_once": {"guard": 0.0001, "execute": 0.015, "total": 0.020},
    }
    table = report.breakdown_table(results_list)
    assert "XLA lazy (trace everytime)" in table and "2.000" in table and "0.100" in table
    options = options_for("--use-xla-baseline", "--breakdown")
    paths = report.write_all(str(tmp_path), options, "small", results_list)
    assert str(tmp_path / "breakdown.png") in paths


def test_goal_lines_compare_trace_once_with_the_limit_and_the_reference():
    options = options_for("--use-xla-baseline", "--peers", "openxla_eval")
    text = report.goals(two_models()[:1], options)
    # trace_once 2.0x vs limit 4.0x: not met; vs openxla_eval 0.040/0.045 = 0.889x: met
    assert "geomean 2.000 >= 99% of the limit 4.000: NOT met" in text
    assert "geomean 2.000 >= openxla_eval's 0.889: met" in text


def test_no_goal_lines_without_the_xla_baseline():
    assert report.goals(two_models(), options_for("--peers", "openxla_eval")) is None


def test_overhead_is_call_minus_execution_minus_transfers():
    result = fake_result("resnet18", {"xla_lazy": [0.050, 0.052], "torchxla_trace_once": [0.041, 0.043]})
    result.runs["xla_lazy"].execute_s = [0.040, 0.040]
    result.runs["torchxla_trace_once"].execute_s = [0.040, 0.041]
    result.floor_phases = {"transfer_in": 0.0005, "execute": 0.040, "transfer_out": 0.0005}
    assert result.overhead_s("xla_lazy") * 1e3 == pytest.approx(10.0)
    assert result.overhead_s("torchxla_trace_once") * 1e3 == pytest.approx(0.5)
    table = report.overhead_table([result], ("torchxla_trace_once",))
    assert "torchxla_trace_once overhead ms" in table and "0.50" in table and "10.00" in table


def test_first_call_table_lists_the_baseline_then_the_contenders():
    table = report.first_call_table(two_models(), ("torchxla_trace_once", "openxla_eval"))
    header = table.splitlines()[1]
    assert header.index("XLA lazy") < header.index("XLA (trace once)") < header.index("openxla_eval")


def test_speedup_spread_comes_from_paired_per_iteration_ratios():
    result = fake_result("resnet18", {"xla_lazy": [0.040, 0.080, 0.040, 0.040],
                                      "torchxla_trace_once": [0.020, 0.040, 0.020, 0.040]})
    # ratios 2, 2, 2, 1: a slow iteration that hit both peers does not widen the spread
    q1, q3 = result.speedup_spread("torchxla_trace_once")
    assert q1 == pytest.approx(1.25) and q3 == pytest.approx(2.0)
    assert "±0.38" in report.speedup_table([result], ("torchxla_trace_once",))
