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

# Of those, packages that run Python they are handed under their own tracing (torch_xla's
# ``scan`` traces its body, an fx graph of AOTAutograd's, on lazy tensors; its GRU is such a
# scan): a frame of theirs runs unwatched with everything it calls, as in eager.
UNWATCHED_PACKAGES = ("torch_xla",)


def runs_unwatched(code: types.CodeType) -> bool:
    """Whether the hook leaves this code, and every frame it calls, alone (``UNWATCHED_PACKAGES``)."""
    return _site_package(os.path.abspath(code.co_filename)) in UNWATCHED_PACKAGES


def _site_package(path: str) -> str:
    """The installed package a file belongs to (the folder below ``site-packages``), or ""."""
    parts = path.split(os.sep)
    return parts[parts.index("site-packages") + 1] if "site-packages" in parts[:-1] else ""


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
    package = _site_package(path)
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
    # (the builtin's own walk: a namedtuple subclass's __iter__ is the program's code)
    items = list(dict.values(value)) if kind is dict else list(tuple.__iter__(value) if issubclass(kind, tuple)
                                                              else list.__iter__(value))
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


# -- torch.compile's and torch.compiler.disable's wrappers -----------------------------------------
# ``torch.compile(fn)`` and ``torch.compiler.disable(fn)`` (``torch._dynamo``) return wrappers that
# switch torch's own frame hook on or off while fn runs.  Torch's hook passes the frames it does
# not take to the hook installed before it (ours), so what runs under such a wrapper would be
# traced by both: torch's compiler's own frames (dataclass ``__init__``s, fake tensors) by ours.
# The wrappers are recognised by their code: a traced caller breaks at the call (translator.
# inline_call), and the wrapper's frame runs unwatched by minidynamo with everything below it
# (FrameConverter.__call__: torch.compile'd code is torch's to compile; a function the user
# disabled runs eagerly, as Dynamo runs it).  ``torch._disable_dynamo`` on torch's own functions
# (``checkpoint``) keeps the old rule: torch's code is skipped, the user code it calls watched.
_torch_wrappers: dict = {}


def torch_wrapper_codes() -> dict:
    """{code: "compile" or "disable"} of the two wrappers, empty while ``torch._dynamo`` is not
    loaded (then none exists).  Read from the loaded module: never imported, never called."""
    if not _torch_wrappers:
        module = sys.modules.get("torch._dynamo.eval_frame")
        for kind, (class_name, code_name) in {"compile": ("_TorchDynamoContext", "compile_wrapper"),
                                              "disable": ("DisableContext", "_fn")}.items():
            context = getattr(module, class_name, None) if module is not None else None
            call = context.__dict__.get("__call__") if isinstance(context, type) else None
            consts = call.__code__.co_consts if isinstance(call, types.FunctionType) else ()
            found = [c for c in consts if isinstance(c, types.CodeType) and c.co_name == code_name]
            if len(found) == 1:
                _torch_wrappers[found[0]] = kind
    return _torch_wrappers


def left_to_torch(func) -> bool:
    """Does this call of a wrapper (``torch_wrapper_codes``) run unwatched by minidynamo?  All of
    torch.compile's; torch.compiler.disable's unless the function it wraps is torch's own."""
    kind = torch_wrapper_codes().get(func.__code__)
    if kind != "disable":
        return kind == "compile"
    code = func.__code__
    wrapped = func.__closure__[code.co_freevars.index("fn")].cell_contents if "fn" in code.co_freevars else None
    inner = getattr(wrapped, "__code__", None)
    return inner is None or skip_reason(inner) is None
