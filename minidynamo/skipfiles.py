"""Code the hook never traces: the standard library, torch itself, and minidynamo's own layers.

Such code is reached only through calls the tracer does not inline (or frames that run eagerly
after a fallback); tracing it would cost time and gain nothing.
"""

from __future__ import annotations

import os
import sysconfig
import types
import weakref

import torch


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


def skip_reason(code: types.CodeType) -> str | None:
    """Why this code is never traced, or None if it may be."""
    filename = code.co_filename
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
disabled_codes: "weakref.WeakSet" = weakref.WeakSet()
