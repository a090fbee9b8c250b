"""The slow path: on a miss, say in words which guard failed first.

It interprets the planner's steps one by one (blocks opened: it checks everything), so it
agrees with the fast function by construction and can report what it found instead.
"""

from __future__ import annotations

from typing import Any, Optional

from .checks import show
from .planner import FUNC, Block, Planner, Read, local_var
from .source import FrameInfo


def flatten(steps: list) -> list:
    """Every Read and Test, blocks opened (the slow path checks everything)."""
    flat = []
    for step in steps:
        flat += flatten(step.steps) if isinstance(step, Block) else [step]
    return flat


class Explainer:
    """Runs the planned steps one by one and names the first one that fails."""

    def __init__(self, planner: Planner, frame_info: FrameInfo):
        self.steps = flatten(planner.steps)
        self.namespace = planner.consts.namespace
        self.arg_names = frame_info.arg_names
        self._code: dict[str, Any] = {}

    def _eval(self, expr: str, env: dict) -> Any:
        if expr not in self._code:
            self._code[expr] = compile(expr, "<guard slow path>", "eval")
        return eval(self._code[expr], self.namespace, env)

    def __call__(self, func: Any, *args: Any) -> Optional[str]:
        if len(args) != len(self.arg_names):
            return f"expected {len(self.arg_names)} argument slots, got {len(args)}"
        env = {FUNC: func, **{local_var(n): a for n, a in zip(self.arg_names, args)}}
        for step in self.steps:
            if isinstance(step, Read):
                try:
                    env[step.var] = self._eval(step.expr, env)
                except Exception as error:
                    return f"{step.label}: could not read it ({type(error).__name__}: {error})"
                continue
            for check in step.checks:
                try:
                    if self._eval(check.test, env):
                        continue
                    actual = show(self._eval(check.actual, env))
                except Exception as error:
                    actual = f"an error ({type(error).__name__}: {error})"
                return f"{check.label}: expected {check.expected}, got {actual}"
        return None
