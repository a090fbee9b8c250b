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
