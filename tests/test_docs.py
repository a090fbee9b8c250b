"""Docs that cannot rot: generated text is regenerated and compared, maps are checked against
the code they describe.

- ``docs/walkthrough.md`` is what ``docs/walkthrough.py`` prints (regenerate:
  ``python docs/walkthrough.py --write``); the README's "Watching it work" sample is a section
  of it.
- The tracker map in ``minidynamo/tracer/variables/base.py`` names every VariableTracker, each
  under its base class and in its file.
- Code names a docstring of minidynamo quotes (````ListVariable````, ````_consumed_items````)
  exist.
"""

import ast
import builtins
import collections
import dis
import functools
import glob
import importlib
import inspect
import itertools
import operator
import os
import pkgutil
import re
import subprocess
import sys
import types
import typing

import bytecode
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# -- the walkthrough and the README ------------------------------------------------------------
def test_walkthrough_is_up_to_date():
    """Re-runs the walkthrough (its XLA part in a subprocess of its own) and compares."""
    env = dict(os.environ, PJRT_DEVICE="CPU", PYTHONPATH=ROOT)
    env.pop("MINIDYNAMO_LOG", None)
    done = subprocess.run([sys.executable, os.path.join("docs", "walkthrough.py"), "--check"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


# -- the tracker map ---------------------------------------------------------------------------
MAP_LINE = re.compile(r"^    (?P<tree>[ │├└─]*)(?P<name>[A-Z]\w+)\s+(?P<file>\w+\.py)\b")


def tracker_classes() -> dict:
    import minidynamo.tracer as tracer
    import minidynamo.tracer.variables as package
    from minidynamo.tracer.variables.base import VariableTracker

    for pkg in (tracer, package):      # every module, so the answer does not depend on test order
        for info in pkgutil.iter_modules(pkg.__path__):
            importlib.import_module(f"{pkg.__name__}.{info.name}")
    found, todo = {}, [VariableTracker]
    while todo:
        klass = todo.pop()
        found[klass.__name__] = klass
        todo += klass.__subclasses__()
    return {name: klass for name, klass in found.items() if not name.startswith("_")}


def map_entries() -> list:
    """(depth, class name, file) per line of the map, in order."""
    from minidynamo.tracer.variables import base

    entries = []
    for line in base.__doc__.splitlines():
        match = MAP_LINE.match(line)
        if match:
            depth = len(match["tree"]) // 5          # " ├── " is the first level, "│    ├── " the next
            entries.append((depth, match["name"], match["file"]))
    return entries


def test_tracker_map_matches_the_code():
    classes = tracker_classes()
    entries = map_entries()
    named = [name for _, name, _ in entries]
    assert len(named) == len(set(named)), "a tracker is listed twice"
    missing = sorted(set(classes) - set(named))
    assert not missing, f"trackers missing from the map in variables/base.py: {missing}"
    gone = sorted(set(named) - set(classes))
    assert not gone, f"the map in variables/base.py lists classes that do not exist: {gone}"
    parents = []
    for depth, name, filename in entries:
        klass = classes[name]
        assert klass.__module__.rsplit(".", 1)[-1] + ".py" == filename, f"{name} lives in {klass.__module__}"
        parents[depth:] = [klass]
        if depth:
            assert parents[depth - 1] in klass.__bases__, f"{name} is drawn under {parents[depth - 1].__name__}"


def defined_names(paths) -> set:
    names = set()
    for path in paths:
        with open(path) as source:
            tree = ast.parse(source.read())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("_"):
                names.update(alias.asname or alias.name for alias in node.names)   # defined in C
    return names


def looks_like_our_symbol(name: str) -> bool:
    """CamelCase classes, _private helpers and CONSTANT tables: names a reader would look up."""
    return bool(re.fullmatch(r"[A-Z][a-z0-9]+[A-Z]\w*", name) or re.fullmatch(r"_[a-z]\w*", name)
                or re.fullmatch(r"[A-Z][A-Z0-9]*_[A-Z0-9_]+", name))


# Where a quoted name that is not ours may come from: Python, the bytecode package, torch objects.
EXTERNAL_NAMESPACES = (builtins, dis.opmap, bytecode, collections, itertools, functools, operator, inspect, types,
                       typing, collections.namedtuple("Point", "x"), torch.nn.Module(), torch.Tensor)
THIRD_PARTY = {"FakeTensorMode", "ModelOutput"}    # torch._subclasses, transformers


def is_external(name: str) -> bool:
    return name in THIRD_PARTY or name.startswith("MINIDYNAMO_") or any(
        name in space if isinstance(space, dict) else hasattr(space, name) for space in EXTERNAL_NAMESPACES)


def test_names_quoted_in_docstrings_exist():
    paths = [p for p in glob.glob(os.path.join(ROOT, "minidynamo", "**", "*.py"), recursive=True)]
    known = defined_names(paths + glob.glob(os.path.join(ROOT, "guards", "*.py")))
    stale = []
    for path in paths:
        with open(path) as source:
            tree = ast.parse(source.read())
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)):
                for name in re.findall(r"``([A-Za-z_]\w*)``", ast.get_docstring(node) or ""):
                    if looks_like_our_symbol(name) and name not in known and not is_external(name):
                        stale.append(f"{os.path.relpath(path, ROOT)}: {name}")
    assert not stale, "docstrings name code that does not exist:\n" + "\n".join(stale)


# -- docs/dynamo-map.md ------------------------------------------------------------------------
def map_rows():
    """(line number, cell text) of every "here" cell of docs/dynamo-map.md's tables."""
    column = None
    with open(os.path.join(ROOT, "docs", "dynamo-map.md")) as handle:
        for number, line in enumerate(handle, 1):
            if not line.startswith("|"):
                column = None
                continue
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if column is None:
                column = cells.index("here") if "here" in cells else -1
            elif column >= 0 and not set(cells[0]) <= set("-"):
                yield number, cells[column]


def test_dynamo_map_names_real_files_and_symbols():
    every_file = [p for package in ("minidynamo", "guards", "xla_bridge")
                  for p in glob.glob(os.path.join(ROOT, package, "**", "*.*"), recursive=True)
                  if p.endswith((".py", ".c", ".cpp"))]
    text_of = {}

    def text(path):
        if path not in text_of:
            with open(path) as handle:
                text_of[path] = handle.read()
        return text_of[path]

    rows, problems = 0, []
    for number, cell in map_rows():
        rows += 1
        quoted = re.findall(r"`([^`]+)`", cell)
        paths = [q for q in quoted if q.endswith((".py", ".c", ".cpp"))]
        for path in paths:
            if not os.path.exists(os.path.join(ROOT, path)):
                problems.append(f"line {number}: no file {path}")
        files = [os.path.join(ROOT, p) for p in paths] or every_file
        for name in (q for q in quoted if re.fullmatch(r"[A-Za-z_]\w*", q)):
            if not any(re.search(rf"\b{name}\b", text(path)) for path in files if os.path.exists(path)):
                problems.append(f"line {number}: {name} not found in {', '.join(paths) or 'the packages'}")
    assert rows > 40
    assert not problems, "\n".join(problems)
