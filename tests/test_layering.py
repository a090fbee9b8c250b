"""Layers import only downwards (README, "The pipeline"): ``guards`` and ``xla_bridge`` sit below
minidynamo and never import it (so never the tracer); the tracer never imports the layer that
drives it (``convert_frame``, ``eval_frame``, ``explain``); nothing of ours imports
``torch._dynamo``.  Checked twice: statically (every import statement, including those inside
functions) and at run time (what importing each package really loads)."""

import ast
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def python_files(package: str):
    for folder, _, files in os.walk(os.path.join(ROOT, package)):
        for name in files:
            if name.endswith(".py"):
                yield os.path.join(folder, name)


def module_name(path: str) -> str:
    relative = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
    return relative[: -len(".__init__")] if relative.endswith(".__init__") else relative


def imports_of(path: str):
    """(line, absolute module name) for every import statement in the file."""
    package = module_name(path)
    if not path.endswith("__init__.py"):
        package = package.rpartition(".")[0]
    with open(path) as source:
        tree = ast.parse(source.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module
            yield node.lineno, prefix
            for alias in node.names:                   # ``from .. import tracer`` imports a module
                yield node.lineno, f"{prefix}.{alias.name}"


FORBIDDEN = {
    "guards": ("minidynamo",),
    "xla_bridge": ("minidynamo",),
    "minidynamo/tracer": ("minidynamo.convert_frame", "minidynamo.eval_frame", "minidynamo.explain"),
    "minidynamo": ("torch._dynamo", "torch._C._dynamo"),
}


def is_under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_import_statements_go_downwards(package):
    forbidden = FORBIDDEN[package] + ("torch._dynamo", "torch._C._dynamo")
    found = [f"{os.path.relpath(path, ROOT)}:{line} imports {name}"
             for path in python_files(package) for line, name in imports_of(path)
             if any(is_under(name, bad) for bad in forbidden)]
    assert not found, "\n".join(found)


def test_the_scan_sees_relative_imports():
    path = os.path.join(ROOT, "minidynamo", "tracer", "translator.py")
    names = {name for _, name in imports_of(path)}
    assert "minidynamo.exc.Unsupported" in names and "minidynamo.tracer.builder" in names


def test_importing_the_lower_layers_loads_no_minidynamo():
    program = (
        "import importlib, pkgutil, sys\n"
        "for package in ('guards', 'xla_bridge'):\n"
        "    root = importlib.import_module(package)\n"
        "    for info in pkgutil.iter_modules(root.__path__):\n"
        "        importlib.import_module(f'{package}.{info.name}')\n"
        "print(sorted(m for m in sys.modules if m == 'minidynamo' or m.startswith('minidynamo.')))\n"
    )
    env = dict(os.environ, PJRT_DEVICE="CPU", PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, "-c", program], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


# -- the tracer's import cycles -------------------------------------------------------------------
# The one cycle the tracer is built around, as in Dynamo: ``wrap`` (builder.py, Dynamo's
# ``VariableBuilder``) makes trackers, trackers wrap what they produce, and the operator rules over
# trackers (operators.py, the part of Dynamo's ``BuiltinVariable`` that runs ``a + b``, ``a == b``)
# are what container trackers call to compare and combine their items.
ALLOWED_CYCLE = ("minidynamo.tracer.builder", "minidynamo.tracer.operators", "minidynamo.tracer.variables.")
# No other: a graph break's output templates extend the capture's (graph_break.BreakTemplates <
# templates.Templates) and capture calls graph_break on the break path, so the templates live in
# a module of their own, below both.
KNOWN_CYCLES = []


def import_graph(package: str) -> dict:
    """module -> the modules of ours it imports (statements anywhere in the file, function-local
    ones included: they are cycles deferred, not removed).  Packages' ``__init__`` are left out:
    importing a submodule loads them anyway."""
    modules = {module_name(path): path for path in python_files(package)}
    packages = {name for name, path in modules.items() if path.endswith("__init__.py")}
    return {name: {imported for _, imported in imports_of(path)
                   if imported in modules and imported not in packages and imported != name}
            for name, path in modules.items() if name not in packages}


def cycles(graph: dict) -> list:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]

    def visit(root):
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]; counter[0] += 1
        stack.append(root); on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]; counter[0] += 1
                    stack.append(child); on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop(); on_stack.discard(member); component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_tracer_has_only_the_named_import_cycles():
    allowed = lambda name: name.startswith(ALLOWED_CYCLE[2]) or name in ALLOWED_CYCLE[:2]
    found = cycles(import_graph("minidynamo"))
    unexpected = [sorted(c) for c in found if not all(allowed(m) for m in c) and c not in KNOWN_CYCLES]
    assert not unexpected, f"import cycles beyond wrap <-> trackers <-> operators: {unexpected}"
    core = [c for c in found if "minidynamo.tracer.builder" in c]
    assert core and "minidynamo.tracer.variables.tensor" in core[0]      # the scan does see the core cycle


def test_the_cycle_scan_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
