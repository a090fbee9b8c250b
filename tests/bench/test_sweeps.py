"""The model sweeps' shared parts (bench/sweeps.py): the rounding-aware comparison and the table,
run on one small torchvision model."""

import torch

from bench import sweeps, torchvision_sweep


def test_close_allows_rounding_and_nothing_more():
    a = torch.tensor([1000.0, -2.0, 0.5])
    assert sweeps.close(a, a + torch.tensor([0.5, 0.0, 0.0]))             # within 1e-3 of the largest
    assert not sweeps.close(a, a + torch.tensor([0.0, 2.0, 0.0]))
    assert not sweeps.close(a, a[:2])
    grad = torch.tensor([0.0, 1e-7])                                        # rounding noise of a zero
    assert not sweeps.close(grad, torch.tensor([3e-5, 0.0]))
    assert sweeps.close(grad, torch.tensor([3e-5, 0.0]), floor=5e-5)


def test_a_sweep_prints_a_row_and_the_totals(capsys):
    rows = sweeps.run_table(sweeps.parse(["--only", "squeezenet1_1,no_such_model", "--calls", "2", "--train"],
                                         "", torchvision_sweep.MODELS), torchvision_sweep.run_one, width=38)
    out = capsys.readouterr().out
    assert [r["name"] for r in rows] == ["squeezenet1_1"] and rows[0]["equal"] is True
    assert rows[0]["graphs"] == 1 and rows[0]["breaks"] == 0
    assert "no_such_model" in out and "ERROR" in out
    assert "1 models (train, backend eager): 1 of 1 compared equal to eager on every call, 1 in one graph" in out
