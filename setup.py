"""Builds the C extensions (the frame hook, guard helpers); everything else is in pyproject.toml.

Three extensions are C++ and optional: ``guards._tensor_match`` (tensor guards read from
at::Tensor), ``xla_bridge._replay`` (the replay call) and ``minidynamo._jit_state`` (the JIT
tracer's state, read without Python). They compile against the torch installed in the build
environment, so they are built when ``import torch`` works here (``pip install
--no-build-isolation``, or ``setup.py build_ext`` with the project's venv) and skipped with a note
otherwise: the project then uses its C and Python paths, with the same answers.
"""
from glob import glob

from setuptools import Extension, setup

C_FLAGS = ["-O2", "-std=c11", "-Wall", "-Wno-missing-braces"]

ext_modules = [
    # the PEP 523 frame hook and the per-code caches
    Extension("minidynamo._eval_frame", sources=["minidynamo/_eval_frame.c"], extra_compile_args=C_FLAGS),
    # nn.Module calls that go straight to forward when Module.__call__ would do nothing else
    Extension("minidynamo._module_call", sources=["minidynamo/_module_call.c"], extra_compile_args=C_FLAGS),
    # an exact copy of a set's hash table (a set the trace made, rebuilt in eager's order)
    Extension("minidynamo._set_table", sources=["minidynamo/_set_table.c"], extra_compile_args=C_FLAGS),
    # optional fast paths for guard checks (guards/ falls back to Python without it)
    Extension("guards._guard_helpers", sources=["guards/_guard_helpers.c"], extra_compile_args=C_FLAGS),
]
cmdclass = {}

try:
    import torch  # noqa: F401
    from torch.utils.cpp_extension import BuildExtension, CppExtension
except Exception as error:  # no torch at build time (an isolated build): C and Python paths only
    print(f"note: guards._tensor_match (C++ tensor guards) not built: cannot import torch ({error})")
else:
    # optional C++ tensor matching; one translation unit (the build has 2 cores) whose parts are
    # the headers in guards/csrc (listed so that a change to one rebuilds it)
    ext_modules.append(CppExtension("guards._tensor_match", sources=["guards/_tensor_match.cpp"],
                                    depends=sorted(glob("guards/csrc/*.h")),
                                    extra_compile_args=["-O2", "-g0", "-Wall"]))
    # optional: the JIT tracer's thread state for the nn.Module call shortcut (else asked of Python)
    ext_modules.append(CppExtension("minidynamo._jit_state", sources=["minidynamo/_jit_state.cpp"],
                                    extra_compile_args=["-O2", "-g0", "-Wall"]))
    # optional C++ replay call of torchxla_trace_once (xla_bridge falls back to Python without it)
    ext_modules.append(CppExtension("xla_bridge._replay", sources=["xla_bridge/_replay.cpp"],
                                    extra_compile_args=["-O2", "-g0", "-Wall"]))
    # Without ninja: the C extensions then keep being compiled as C (ninja would use c++).
    cmdclass["build_ext"] = BuildExtension.with_options(use_ninja=False)

setup(ext_modules=ext_modules, cmdclass=cmdclass)
