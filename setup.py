"""Builds the one C extension, the PEP 523 frame hook; everything else is in pyproject.toml."""
from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "minidynamo._eval_frame",
            sources=["minidynamo/_eval_frame.c"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wno-missing-braces"],
        )
    ]
)
