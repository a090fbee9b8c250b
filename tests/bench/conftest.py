"""Shared pieces of the harness tests: a tiny model registered in the zoo, and fake results."""

import dataclasses

import pytest
import torch

from bench import models
from bench.measure import PeerRun
from bench.options import parse_args
from bench.results import ModelResult


class TinyNet(torch.nn.Module):
    """Small enough to run in milliseconds, deep enough to have a graph: conv, pool, linear."""

    def __init__(self, _regime=None):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.fc = torch.nn.Linear(4, 5)

    def forward(self, x):
        return self.fc(self.conv(x).relu().mean(dim=(2, 3)))


@pytest.fixture
def tiny_model(monkeypatch):
    """Registers "tiny" in the model zoo for the duration of a test."""
    spec = models.ModelSpec("tiny", TinyNet, models._images)
    monkeypatch.setitem(models.MODELS, "tiny", spec)
    return "tiny"


def options_for(*argv, **changes):
    """Options as the command line would give them, then with ``changes`` applied."""
    return dataclasses.replace(parse_args(list(argv)), **changes)


def fake_result(model, times, baseline="xla_lazy", floor_s=None, accuracy=None):
    """A ModelResult from {peer: [seconds...]} without running anything."""
    runs = {}
    for peer, samples in times.items():
        runs[peer] = PeerRun(peer, first_call_s=1.0, times_s=list(samples), execute_s=[0.0] * len(samples))
        if peer != baseline:
            runs[peer].accuracy = (accuracy or {}).get(peer)
    return ModelResult(model, "small", baseline, runs, floor_s=floor_s)
