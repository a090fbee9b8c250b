"""PyTorch's own Dynamo function tests, run by minidynamo and by torch.compile side by side.

    python -m bench.dynamo_cases --cases PATH/test_functions.py [--peer minidynamo|torch_compile]
                                 [-k SUBSTRING] [--json OUT]

``PATH`` is a local copy of ``test/dynamo/test_functions.py`` from the PyTorch repository (not
shipped here: it is their code). The harness executes the file's module level with its own
``make_test``, which records each ``@make_test`` case instead of building a unittest method, so
the cases are the plain functions the file defines. Cases a ``unittest.skip*`` decorator turns
off on this machine (CUDA, old Pythons) are counted as skipped; every other test method of the
file (those with their own fixtures) is not run.

Each case is called the way ``torch._dynamo.testing.standard_test`` calls it, with ``nargs``
random 10x10 tensors, on two argument sets, twice each (calls 1-4), every call on fresh clones
(several cases mutate their arguments), and compared with eager on the same clones.

Per case and contender: equal to eager on all four calls, graphs compiled, whether the case was
*captured in one graph* (minidynamo: no fallback and nothing compiled after the first call;
torch.compile: ``fullgraph=True`` succeeds and nothing recompiles), and the first reason it was
not. Each contender runs in its own process, so neither sees the other's frame hook or caches.
"""

from __future__ import annotations

import argparse
import ast
import collections
import json
import os
import subprocess
import sys
import types

PEERS = ("minidynamo", "torch_compile")


# -- reading the cases -----------------------------------------------------------------------

def load_cases(path):
    """``{name: (fn, expected_frame_count, skip_reason_or_None)}`` from a test_functions.py copy.

    Module-level statements run one at a time; a statement that fails (an import this machine
    lacks, such as triton) is dropped with the cases that need it reporting the NameError.
    """
    source = open(path).read()
    tree = ast.parse(source, path)
    module = types.ModuleType("dynamo_cases_source")
    module.__file__ = path
    sys.modules[module.__name__] = module          # dataclasses / NamedTuple look the module up
    namespace = module.__dict__

    def make_test(fn=None, expected_frame_count=1):
        if fn is None:
            return lambda fn: make_test(fn, expected_frame_count=expected_frame_count)

        def test_fn(self):
            raise NotImplementedError("run by bench.dynamo_cases")

        test_fn._case = (fn, expected_frame_count)
        return test_fn

    dropped = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "make_test":
            namespace["make_test"] = make_test
            continue
        try:
            _exec_node(node, path, namespace)
        except Exception as e:  # noqa: BLE001 - a line this machine cannot run
            if not isinstance(node, ast.ClassDef):
                dropped.append(f"line {node.lineno}: {type(e).__name__}: {e}")
                continue
            # A test class whose base or decorators need test-only packages (expecttest): its
            # cases are plain functions, so run the body again on ``object`` without those.
            node.bases, node.keywords = [], []
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    item.decorator_list = [d for d in item.decorator_list if _resolvable(d, namespace)]
            try:
                _exec_node(node, path, namespace)
            except Exception as e2:  # noqa: BLE001
                dropped.append(f"line {node.lineno}: {type(e2).__name__}: {e2}")
    cases = {}
    for value in list(namespace.values()):
        if not isinstance(value, type):
            continue
        for name, attr in vars(value).items():
            case = getattr(attr, "_case", None)
            if case is None or not name.startswith("test"):
                continue
            skip = getattr(attr, "__unittest_skip_why__", None) if getattr(attr, "__unittest_skip__", False) else None
            cases[name] = (case[0], case[1], skip)
    return cases, dropped


def _exec_node(node, path, namespace):
    exec(compile(ast.Module(body=[node], type_ignores=[]), path, "exec"), namespace)


def _resolvable(expr, namespace):
    """The decorator's leading name exists (``unittest`` in ``unittest.skipIf(...)``)."""
    while isinstance(expr, (ast.Call, ast.Attribute)):
        expr = expr.func if isinstance(expr, ast.Call) else expr.value
    return isinstance(expr, ast.Name) and (expr.id in namespace or hasattr(__builtins__, expr.id)
                                           if not isinstance(__builtins__, dict) else
                                           expr.id in namespace or expr.id in __builtins__)


# -- comparing results -------------------------------------------------------------------------

def same(a, b):
    """Eager and compiled results are equal: same structure, same types, tensors allclose."""
    import numpy as np
    import torch

    if isinstance(a, torch.Tensor):
        return (isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype
                and bool(torch.allclose(a, b, equal_nan=True, atol=1e-5, rtol=1e-4)))
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.shape == b.shape and np.allclose(a, b, equal_nan=True)
    if type(a) is not type(b):
        # a namedtuple class made inside the function is a new class on every call
        fields = getattr(type(a), "_fields", None)
        if not (isinstance(a, tuple) and type(a).__name__ == type(b).__name__
                and fields is not None and fields == getattr(type(b), "_fields", None)):
            return False
    if isinstance(a, dict):
        return list(a.keys()) == list(b.keys()) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple, collections.deque)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        return a == b or (a != a and b != b)
    return a == b


def _clone(args):
    return [a.clone() for a in args]


def _arguments(nargs):
    import torch

    torch.manual_seed(0)
    args1 = [torch.randn(10, 10) for _ in range(nargs)]
    args2 = [torch.randn(10, 10) for _ in range(nargs)]
    return [args1, args2, args1, args2]


# -- the contenders --------------------------------------------------------------------------

def run_minidynamo(fn, calls):
    import minidynamo
    from minidynamo.eval_frame import OptimizeContext
    from minidynamo.explain import ExplainOutput

    minidynamo.reset()
    recorder = ExplainOutput()                # the FrameConverter's recorder protocol
    compiled = OptimizeContext("eager", recorder=recorder)(fn)
    outputs = [compiled(*_clone(args)) for args in calls]
    captured = not recorder.reasons           # no break, no fallback, no recompile
    reason = (recorder.reasons + [""])[0]
    minidynamo.reset()
    return outputs, recorder.graph_count, captured, reason


def run_torch_compile(fn, calls):
    import torch

    graphs = []

    def counting_backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    reason = ""
    try:
        compiled = torch.compile(fn, backend=counting_backend, fullgraph=True)
        outputs = [compiled(*_clone(args)) for args in calls]
        captured = len(graphs) <= 1
        if not captured:
            reason = f"{len(graphs)} graphs (recompiled)"
    except Exception as e:  # noqa: BLE001 - fullgraph refused: run it the forgiving way
        reason = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
        torch._dynamo.reset()
        graphs.clear()
        compiled = torch.compile(fn, backend=counting_backend)
        outputs = [compiled(*_clone(args)) for args in calls]
        captured = False
    torch._dynamo.reset()
    return outputs, len(graphs), captured, reason


RUNNERS = {"minidynamo": run_minidynamo, "torch_compile": run_torch_compile}


def run_peer(peer, cases, substring=None):
    """One row per case: ``{case, status, equal, graphs, captured, reason}``."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _run_peer(peer, cases, substring)


def _run_peer(peer, cases, substring):
    import inspect

    rows = []
    for name, (fn, _expected_frames, skip) in sorted(cases.items()):
        if substring and substring not in name:
            continue
        row = {"case": name, "status": "ran", "equal": None, "graphs": 0, "captured": False, "reason": ""}
        rows.append(row)
        if skip is not None:
            row.update(status="skipped", reason=skip)
            continue
        calls = _arguments(len(inspect.signature(fn).parameters))
        try:
            expected = [fn(*_clone(args)) for args in calls]
        except Exception as e:  # noqa: BLE001
            row.update(status="skipped", reason=f"eager raises {type(e).__name__}: {e}")
            continue
        try:
            outputs, graphs, captured, reason = RUNNERS[peer](fn, calls)
        except Exception as e:  # noqa: BLE001
            row.update(status="raised", equal=False, reason=f"{type(e).__name__}: {e}"[:300])
            continue
        row.update(equal=all(same(e, o) for e, o in zip(expected, outputs)), graphs=graphs,
                   captured=captured, reason=reason[:300])
    return rows


# -- the report ------------------------------------------------------------------------------

def _run_in_subprocess(peer, args):
    command = [sys.executable, "-m", "bench.dynamo_cases", "--cases", args.cases, "--peer", peer, "--json", "-"]
    if args.k:
        command += ["-k", args.k]
    env = dict(os.environ, PJRT_DEVICE=os.environ.get("PJRT_DEVICE", "CPU"))
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{peer} run failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def totals(rows):
    ran = [r for r in rows if r["status"] != "skipped"]
    return {"cases": len(rows), "skipped": len(rows) - len(ran),
            "captured_one_graph": sum(r["captured"] and r["equal"] for r in ran),
            "wrong": sum(r["status"] == "ran" and not r["equal"] for r in ran),
            "raised": sum(r["status"] == "raised" for r in ran)}


def print_table(by_peer):
    md, tc = by_peer.get("minidynamo"), by_peer.get("torch_compile")
    peers = [p for p in PEERS if p in by_peer]
    names = [r["case"] for r in by_peer[peers[0]]]
    index = {p: {r["case"]: r for r in by_peer[p]} for p in peers}
    print(f"{'case':48s} " + " ".join(f"{p[:10]:>10s} eq gr" for p in peers) + "  minidynamo's reason")
    for name in names:
        cells = []
        for p in peers:
            r = index[p][name]
            if r["status"] == "skipped":
                cells.append(f"{'skipped':>10s}   -  ")
                continue
            mark = "one-graph" if r["captured"] else ("raised" if r["status"] == "raised" else "partial")
            cells.append(f"{mark:>10s} {'Y' if r['equal'] else 'N':>2s} {r['graphs']:2d}")
        reason = index[peers[0]][name]["reason"] if md is not None else ""
        print(f"{name:48s} " + " ".join(cells) + f"  {reason[:110]}")
    print()
    for p in peers:
        print(f"{p:14s} " + ", ".join(f"{k}={v}" for k, v in totals(by_peer[p]).items()))
    if md is not None and tc is not None:
        wrong = [r["case"] for r in md if r["status"] != "skipped" and not r["equal"]]
        print("minidynamo wrong or raised:", ", ".join(wrong) or "none")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", required=True, help="local copy of pytorch's test/dynamo/test_functions.py")
    parser.add_argument("--peer", choices=PEERS, help="run one contender in this process")
    parser.add_argument("-k", help="only cases whose name contains this")
    parser.add_argument("--json", help="write the rows as JSON here ('-' for stdout)")
    args = parser.parse_args(argv)
    if args.peer:
        cases, dropped = load_cases(args.cases)
        rows = run_peer(args.peer, cases, args.k)
        if args.json == "-":
            print(json.dumps({args.peer: rows, "dropped": dropped}))
            return
        by_peer = {args.peer: rows}
    else:
        by_peer = {}
        for peer in PEERS:
            by_peer.update({k: v for k, v in _run_in_subprocess(peer, args).items() if k in PEERS})
    print_table(by_peer)
    if args.json and args.json != "-":
        with open(args.json, "w") as f:
            json.dump(by_peer, f, indent=1)


if __name__ == "__main__":
    main()
