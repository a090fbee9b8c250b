"""Builds the C extensions (the frame hook, guard helpers); everything else is in pyproject.toml."""
from setuptools import Extension, setup

C_FLAGS = ["-O2", "-std=c11", "-Wall", "-Wno-missing-braces"]

setup(
    ext_modules=[
        # the PEP 523 frame hook and the per-code caches
        Extension("minidynamo._eval_frame", sources=["minidynamo/_eval_frame.c"], extra_compile_args=C_FLAGS),
        # optional fast paths for guard checks (guards/ falls back to Python without it)
        Extension("guards._guard_helpers", sources=["guards/_guard_helpers.c"], extra_compile_args=C_FLAGS),
    ]
)
