"""The ``xla`` log topic (``MINIDYNAMO_LOG=xla``): hash, lazy IR, input plan, retraces."""

import logging
import os
import subprocess
import sys
from pathlib import Path

import torch
import torch.fx as fx

import xla_bridge
from tests.xla.xla_testing import to_xla

ROOT = Path(__file__).resolve().parents[2]


def scaled(x, w, k):
    return x @ w * k


def test_capture_and_retrace_are_logged(caplog):
    x, w = to_xla([torch.randn(2, 3), torch.randn(3, 4)])
    with caplog.at_level(logging.DEBUG, logger="minidynamo.xla"):
        compiled = xla_bridge.torchxla_trace_once(fx.symbolic_trace(scaled), [x, w, 2.0])
        with torch.no_grad():
            compiled(x, w, 3.0)                   # a new Python value: a second graph
    text = "\n".join(r.getMessage() for r in caplog.records if r.name == "minidynamo.xla")
    graph = compiled.program.graph
    assert f"captured graph {graph.graph_hash.hex()}" in text
    assert "lazy IR of the captured graph" in text and ("aten::" in text or "xla::" in text)
    assert "arg 0" in text and "arg 1" in text          # the input plan
    assert "retrace: new non-tensor arguments (3.0,)" in text


def test_the_switch_turns_the_topic_on_without_minidynamo():
    code = ("import xla_bridge.log as log, logging, sys; "
            "sys.exit(0 if log.log_xla.isEnabledFor(logging.DEBUG) and 'minidynamo' not in sys.modules else 1)")
    env = {"MINIDYNAMO_LOG": "xla", "PATH": "/usr/bin:/bin"}
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env).returncode == 0


def test_the_first_compile_leaves_the_programs_root_logger_as_it_was():
    """torch_xla's import (on the first compile) calls ``logging.basicConfig()``: the program's
    own ``basicConfig(level=INFO)`` then did nothing and its ``logging.info`` lines vanished."""
    program = (
        "import io, logging, torch, minidynamo\n"
        "minidynamo.optimize('torchxla_trace_once')(lambda x: x * 2 + 1)(torch.ones(3))\n"
        "stream = io.StringIO()\n"
        "logging.basicConfig(level=logging.INFO, stream=stream, format='%(message)s')\n"
        "logging.info('the program logs')\n"
        "print(repr(stream.getvalue()))\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "PJRT_DEVICE": "CPU"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == repr("the program logs\n")
