"""Code the hook never traces: the standard library, torch itself, and minidynamo's own layers.

Such code is reached only through calls the tracer does not inline (or frames that run eagerly
after a fallback); tracing it would cost time and gain nothing.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import types

import torch

from .code_sets import CodesByIdentity


def _package_dir(module) -> str:
    return os.path.dirname(os.path.abspath(module.__file__)) + os.sep


_here = os.path.dirname(os.path.abspath(__file__))
SKIP_DIRS = tuple(
    {
        os.path.abspath(sysconfig.get_paths()["stdlib"]) + os.sep,
        _package_dir(torch),
        _here + os.sep,
        os.path.join(os.path.dirname(_here), "guards") + os.sep,
        os.path.join(os.path.dirname(_here), "xla_bridge") + os.sep,
    }
)
# Third-party infrastructure that model code calls but never needs captured.
SKIP_PACKAGES = (
    "torch_xla", "_pytest", "pluggy", "numpy", "tqdm", "_distutils_hack", "setuptools", "pkg_resources",
    "networkx", "bytecode", "typing_extensions", "matplotlib", "PIL", "psutil", "pandas", "sklearn",
)


# The ``forward`` of torch.nn's own module classes is traced even when eager code calls it, as
# torch.compile does: a graph break inside one (BatchNorm's ``float(num_batches_tracked)`` with
# ``momentum=None``) breaks the caller at the module's call, and the module would otherwise run
# wholly eagerly, uncaptured, on XLA in lazy torch_xla's semantics rather than the graphs' own.
# (module.py, whose ``_call_impl`` runs hooks and fx's GraphModules, stays skipped.)
_NN_MODULES_DIR = os.path.join(_package_dir(torch), "nn", "modules") + os.sep
_NN_MODULE_SKIPPED = os.path.join(_NN_MODULES_DIR, "module.py")


def traced_library_forward(code: types.CodeType) -> bool:
    """A torch.nn module class's ``forward``, which the hook traces though torch is skipped."""
    if code.co_name != "forward":
        return False
    path = os.path.abspath(code.co_filename)
    return path.startswith(_NN_MODULES_DIR) and path != _NN_MODULE_SKIPPED


def skip_reason(code: types.CodeType) -> str | None:
    """Why this code is never traced, or None if it may be."""
    filename = code.co_filename
    if traced_library_forward(code):
        return None
    if filename.startswith("<frozen"):
        return "frozen standard-library module"
    path = os.path.abspath(filename)
    for prefix in SKIP_DIRS:
        if path.startswith(prefix) and "site-packages" not in path[len(prefix):]:
            return f"code in {prefix} is never traced"
    parts = path.split(os.sep)
    if "site-packages" in parts:
        package = parts[parts.index("site-packages") + 1] if parts[-1] != "site-packages" else ""
        if package in SKIP_PACKAGES:
            return f"code of the {package} package is never traced"
    return None


# Code passed to minidynamo.disable: never watched (even after reset()), never inlined.
disabled_codes = CodesByIdentity()


# -- frames with nothing of torch in them ----------------------------------------------------------
def _holds_torch_value(value, seen: set, depth: int = 0) -> bool:
    """A tensor, an nn.Module (or nn.Module class), inside lists, tuples, dicts and namedtuples.
    Asked of the real type: ``isinstance`` would read ``value.__class__`` through a user
    ``__getattribute__``, whose exception would reach the program from a frame it never made."""
    kind = type(value)
    if issubclass(kind, (torch.Tensor, torch.nn.Module)):
        return True
    if issubclass(kind, type):
        return issubclass(value, torch.nn.Module)
    if kind not in (list, tuple, dict) and not (issubclass(kind, tuple) and hasattr(kind, "_fields")):
        return False
    if id(value) in seen or depth > 8:
        return False
    seen.add(id(value))
    items = list(value.values()) if kind is dict else list(value)
    return any(_holds_torch_value(v, seen, depth + 1) for v in items)


def has_torch_bits(func, args) -> bool:
    """Whether a frame may do tensor work, by torch.compile's rule: its code reads a global that
    is torch or one of its modules, or a tensor / nn.Module is among its arguments or closure
    cells (looking into lists, tuples, dicts and namedtuples).  A frame with neither (a config
    object's ``__getattribute__`` or ``__setattr__`` called by ``copy.deepcopy``) is not worth a
    trace; running it as it is is always sound."""
    code = func.__code__
    for name in code.co_names:
        value = func.__globals__.get(name)
        if isinstance(value, types.ModuleType) and (value is torch or value.__name__.startswith("torch.")):
            return True
    cells = []
    for cell in func.__closure__ or ():
        try:
            cells.append(cell.cell_contents)
        except ValueError:
            pass
    seen: set = set()
    return any(_holds_torch_value(v, seen) for v in (*args, *cells))


# -- torch.compiler.disable ------------------------------------------------------------------------
# ``torch.compiler.disable(fn)`` (``torch._dynamo.disable``) returns a wrapper that switches torch's
# frame hook off while fn runs.  Ours it cannot switch off, so the wrapper is recognised by its
# code: a traced caller breaks at its call (translator.inline_call), and a frame it calls runs
# unwatched with everything below it (FrameConverter.__call__), as Dynamo runs it.
_torch_disable_wrapper = None


def torch_disable_wrapper_code():
    """The code of torch.compiler.disable's wrapper, or None while ``torch._dynamo`` is not loaded
    (then no such wrapper exists).  Read from the loaded module: never imported, never called."""
    global _torch_disable_wrapper
    if _torch_disable_wrapper is None:
        module = sys.modules.get("torch._dynamo.eval_frame")
        context = getattr(module, "DisableContext", None) if module is not None else None
        call = context.__dict__.get("__call__") if isinstance(context, type) else None
        consts = call.__code__.co_consts if isinstance(call, types.FunctionType) else ()
        wrappers = [c for c in consts if isinstance(c, types.CodeType) and c.co_name == "_fn"]
        if len(wrappers) == 1:
            _torch_disable_wrapper = wrappers[0]
    return _torch_disable_wrapper


def called_by_torch_disable(caller) -> bool:
    """Is ``caller`` (a frame) torch.compiler.disable's wrapper?"""
    return caller is not None and caller.f_code is torch_disable_wrapper_code() is not None
