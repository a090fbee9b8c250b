"""Every artifact a reader needs, printable with its origin: graph nodes carry the user line that
made them, guards the line that needed them, the hit path its source; the MINIDYNAMO_LOG topics
and the explain() fields show them."""

import logging
import os
import subprocess
import sys

import torch

import minidynamo
from minidynamo import logs

HERE = os.path.basename(__file__)


def helper(y):
    return y.relu() * 2                                  # LINE_HELPER


def f(x, w):
    h = torch.sigmoid(x @ w)                             # LINE_F1
    return helper(h) + 1                                 # LINE_F2


def line_of(marker: str) -> int:
    with open(__file__) as source:
        return next(i for i, text in enumerate(source, 1) if text.rstrip().endswith(f"# {marker}"))


def run_explain():
    x, w = torch.randn(4, 3), torch.randn(3, 2)
    report = minidynamo.explain(f)(x, w)
    torch.testing.assert_close(report.output, f(x, w))
    return report


def test_every_node_has_its_user_line():
    report = run_explain()
    gm = report.graphs[0]
    expected = {"matmul": "LINE_F1", "sigmoid": "LINE_F1", "relu": "LINE_HELPER", "mul": "LINE_HELPER",
                "add": "LINE_F2"}
    for node in gm.graph.nodes:
        assert node.meta.get("stack_trace"), node
        if node.name in expected:
            innermost = node.meta["stack_trace"].strip().splitlines()[-2]
            assert f'{HERE}", line {line_of(expected[node.name])}, in ' in innermost, (node, innermost)
    relu = next(n for n in gm.graph.nodes if n.name == "relu")
    frames = [line for line in relu.meta["stack_trace"].splitlines() if line.strip().startswith("File")]
    assert len(frames) == 2 and "in f" in frames[0] and "in helper" in frames[1]   # the inlined call chain
    code = report.graph_codes[0]
    assert f"{HERE}:{line_of('LINE_F1')} in f, code: h = torch.sigmoid(x @ w)" in code
    assert f"{HERE}:{line_of('LINE_HELPER')} in helper" in code


def test_every_guard_says_which_line_needed_it():
    report = run_explain()
    assert len(report.guard_origins) == len(report.guards)
    origin = dict(zip(report.guards, report.guard_origins))
    torch_guard = next(g for g in report.guards if g.startswith("G['torch'] is"))
    assert origin[torch_guard] == f"{HERE}:{line_of('LINE_F1')} in f"
    helper_guard = next(g for g in report.guards if g.startswith("G['helper'] is"))
    assert origin[helper_guard] == f"{HERE}:{line_of('LINE_F2')} in f"
    x_guard = next(g for g in report.guards if g.startswith("L['x'] tensor"))
    assert origin[x_guard].endswith("in f, on entry")      # arguments are read before any instruction
    assert all(report.guard_origins)
    assert f"(from {HERE}:{line_of('LINE_F1')} in f)" in report.guard_sources[0]


def test_hit_path_sources_are_kept_and_are_what_runs():
    report = run_explain()
    assert report.compiled_fn_sources[0].startswith("def compiled_fn(___func, a0, a1):")
    assert "___reader" in report.reader_sources[0]
    opt = minidynamo.optimize("eager")(f)
    x, w = torch.randn(4, 3), torch.randn(3, 2)
    torch.testing.assert_close(opt(x, w), f(x, w))
    (_, guard_fn, compiled_fn), = minidynamo.cache_entries(f)
    compile(compiled_fn.source, "<check>", "exec")
    assert compiled_fn.source == report.compiled_fn_sources[0]
    assert "(from " in guard_fn.source
    minidynamo.reset()


def test_explain_trace_field_shows_the_stack_after_each_instruction():
    level = logs.get_logger("trace").level
    report = run_explain()
    assert logs.get_logger("trace").level == level          # explain restores the topic
    matmul = next(line for line in report.trace if "BINARY_OP MATRIX_MULTIPLY" in line)
    assert matmul.startswith("f:") and "-> [" in matmul and "Tensor(matmul: float32[4, 2])" in matmul
    assert any(line.startswith("  helper:") for line in report.trace)   # inlined, indented
    assert report.trace[-1].startswith("f:") and "RETURN_VALUE" in report.trace[-1]


def test_explain_keeps_its_debug_records_from_the_programs_own_handlers():
    """explain() turns the trace topic to DEBUG to collect it; a handler the program put on the
    root logger (``basicConfig``, which torch_xla's import also calls) must not get them."""
    class Seen(logging.Handler):
        def __init__(self):
            super().__init__(logging.NOTSET)
            self.names = []

        def emit(self, record):
            self.names.append(record.name)

    seen, root = Seen(), logging.getLogger()
    root.addHandler(seen)
    try:
        report = run_explain()
    finally:
        root.removeHandler(seen)
    assert report.trace                                   # collected
    assert not [name for name in seen.names if name.startswith("minidynamo")]
    assert logs.get_logger("trace").propagate             # restored


def test_topics():
    assert logs.topics_in("all") == {"trace", "graph", "guards", "output_code", "xla", "recompiles", "fallbacks", "graph_breaks"}
    assert logs.topics_in("bytecode, guards") == {"trace", "guards"}
    assert logs.topics_in("nonsense") == set()


def test_output_code_topic(caplog):
    x, w = torch.randn(4, 3), torch.randn(3, 2)
    with caplog.at_level(logging.DEBUG, logger="minidynamo.output_code"):
        torch.testing.assert_close(minidynamo.optimize("eager")(f)(x, w), f(x, w))
    text = "\n".join(r.getMessage() for r in caplog.records if r.name == "minidynamo.output_code")
    assert "def compiled_fn(___func, a0, a1):" in text and "___reader" in text
    minidynamo.reset()


def test_log_switch_from_the_environment():
    program = ("import torch, minidynamo\n"
               "def g(x):\n"
               "    return torch.cos(x) + 1\n"
               "x = torch.ones(3)\n"
               "assert torch.equal(minidynamo.optimize('eager')(g)(x), g(x))\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, MINIDYNAMO_LOG="trace,graph,guards,output_code", PYTHONPATH=root)
    done = subprocess.run([sys.executable, "-c", program], env=env, cwd=root, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    err = done.stderr
    assert "[minidynamo.trace] g:3 BINARY_OP ADD -> [Tensor(add: float32[3])]" in err
    assert "# File: <string>:3 in g" in err                      # graph: the node's line
    assert "(from <string>:3 in g)" in err                       # guards: the line that needed it
    assert "[minidynamo.output_code]" in err and "def compiled_fn(___func, a0):" in err


def test_topics_stay_silent_when_the_program_logs_at_debug():
    """A program that turns DEBUG on for its root logger gets none of minidynamo's records (the
    trace topic alone would log every instruction), unless it names a topic."""
    script = (
        "import io, logging, torch, minidynamo, xla_bridge\n"
        "stream = io.StringIO()\n"
        "logging.basicConfig(level=logging.DEBUG, stream=stream)\n"
        "def f(x):\n"
        "    y = x + 1\n"
        "    print(end='')\n"
        "    return y * 2\n"
        "minidynamo.optimize('eager')(f)(torch.ones(2))\n"
        "lines = [l for l in stream.getvalue().splitlines() if 'minidynamo' in l]\n"
        "print(len(lines))\n"
        "minidynamo.logs.enable('graph_breaks')\n"
        "minidynamo.reset()\n"
        "minidynamo.optimize('eager')(f)(torch.ones(2))\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {k: v for k, v in os.environ.items() if k != "MINIDYNAMO_LOG"}
    env.update(PYTHONPATH=root, PJRT_DEVICE="CPU")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "0"
    assert "[minidynamo.graph_breaks]" in done.stderr      # a named topic still prints
