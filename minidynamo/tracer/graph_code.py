"""A graph's code calls the objects the trace called, not what their names hold when it runs.

torch.fx writes a call of one of torch's functions by its qualified name (``torch.sigmoid(x)``,
``torch.nn.functional.relu(x)``), looked up in the ``torch`` module every time the graph runs.
The trace called an object, not a name. A program that saved the original before patching the
module (``saved = F.relu``, then ``F.relu`` set to a logging wrapper that calls ``saved``) had
the graph call the patch where the program called the original, the patch's side effects a
second time; a profiler patching ``torch.sigmoid`` after the compile changed what a cached
graph computes, with every guard passing.

``CallsTracedObjects`` (the graphs' code generator) gives the code a ``torch`` of its own: each
``torch.…`` name in the code is bound when the code is generated, to the object the trace
called (the node's target) or, for any other name (``torch.float32``), to what the name held
then; each module or class on the way is a namespace of the same kind (``torch.nn.functional``,
``torch.Tensor``), unless the code names it itself. A name the code reaches otherwise is read
from torch itself.
"""

from __future__ import annotations

import functools
import re
import types

import torch
import torch.fx

_QUALIFIED = re.compile(r"\btorch(?:\.[A-Za-z_]\w*)+")


class TracedNames:
    """A namespace: its bound names are plain attributes (looked up as fast as a module's);
    any other is read from the object it stands for."""

    def __init__(self, real):
        self.__dict__["_real"] = real

    def __getattr__(self, name):
        return getattr(self.__dict__["_real"], name)

    def __repr__(self):
        return f"<names of {self.__dict__['_real']!r} as traced>"


class CallsTracedObjects(torch.fx.graph.CodeGen):
    """The default code generator, with ``torch`` bound as the trace saw it (module docstring)."""

    def _gen_python_code(self, nodes, *args, **kwargs):
        code = super()._gen_python_code(nodes, *args, **kwargs)
        if code.globals.get("torch") is torch:
            code.globals["torch"] = traced_torch(code.src, _called(nodes))
        return code


def _called(nodes) -> dict:
    """{qualified name: target} for the functions the nodes call."""
    called = {}
    for node in nodes:
        if node.op == "call_function" and not isinstance(node.target, str):
            try:
                called[torch.fx.node._get_qualified_name(node.target)] = node.target
            except Exception:     # noqa: BLE001  (a target fx names otherwise: not a torch name)
                pass
    return called


def traced_torch(src: str, called: dict) -> TracedNames:
    """A ``torch`` for code ``src``: every ``torch.…`` name in it bound (longest first, so that
    a name's prefixes stay namespaces) to what ``called`` says, else to what it holds now."""
    root = TracedNames(torch)
    paths = set(_QUALIFIED.findall(src))
    for path in sorted(paths, key=len, reverse=True):
        parts = path.split(".")[1:]
        value = called.get(path, _UNBOUND)
        if value is _UNBOUND:
            try:
                value = functools.reduce(getattr, parts, torch)
            except Exception:     # noqa: BLE001  (not a name of torch's: left to the module)
                continue
        _bind(root, parts, value, paths)
    return root


_UNBOUND = object()


def _bind(namespace: TracedNames, parts: list, value, paths: set) -> None:
    """Bind ``namespace.<parts>`` to ``value``: a module or a class on the way becomes a
    namespace of its own (``torch.Tensor.add``: the method the trace called, a patched class
    attribute left aside), but for one the code names itself (``isinstance(v, torch.Tensor)``),
    which is bound as itself, its attributes read from it when the code runs."""
    path = "torch"
    for part in parts[:-1]:
        path = f"{path}.{part}"
        inner = namespace.__dict__.get(part)
        if inner is None:
            try:
                real = getattr(namespace.__dict__["_real"], part)
            except AttributeError:
                return
            if not isinstance(real, (types.ModuleType, type)) or path in paths:
                namespace.__dict__[part] = real
                return
            inner = namespace.__dict__[part] = TracedNames(real)
        elif not isinstance(inner, TracedNames):
            return
        namespace = inner
    namespace.__dict__.setdefault(parts[-1], value)
