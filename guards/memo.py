"""Skip what cannot have changed: a guard's fast path behind dict version tags.

On CPython 3.11 every change to a dict gives it a new tag.  When a guard starts from an
argument pinned by identity (``L['self'] is <the model>``), most of what it checks is read
through dicts (``__dict__``, ``_modules``, ``_parameters``, hook dicts) and decided by
identity (``is``, constants, module flags).  The full guard notes every dict it reads
through; once it passes, the next call first asks the memo (``DictMemo``, C) whether all
those dicts still have their tags and owners (tags come from one process-wide counter that
only grows, so "no tag above the counter's value when the full guard began" says it for all of
them with one comparison a dict; and while no dict at all changed since the memo last said so,
which the same counter tells in one step, it skips the tags).  If so, every such read would
give the same objects again, so only what can change behind a dict's back runs: tensor
metadata, grad mode, reads through plain attributes.  (The types of objects whose class may be
reassigned, and which dict each owner holds, are noted too, and re-checked by the memo in C.)

    def ___guard(___func, L_self, L_x):
        try:
            if L_self is ___pin_0() is not None and ___memo_1.valid():   # nothing noted has changed
                v7, v19 = ___memo_1.values
                if not ___tensor_match_9(v7, v19, L_x): return False
                return True
            ___token = ___memo_1.begin(...)   # the full guard, noting what it reads through
            ...
            ___memo_1.commit((v7, v19), ___token)
        ...

The memo owns the dicts it notes but only borrows the objects whose ``__dict__`` it watches (the
pin is weak: ``guard.pin``); it reads them after the dicts that hold them proved unchanged.

A variable is *stable* when it is a pinned argument, ``X.__dict__`` of a stable X, ``B[k]`` of
a stable B that is a dict or a tuple (the memo refuses to commit otherwise), ``B[k]`` (or a
builtin's lookup) of a dict constant the plan names (an inlined function's globals: ``begin()``
notes that dict), or a constant the plan names.  The plan reads the planner's structured fields
(``Read.how``, ``Test.uses``), never the generated text.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from . import module_facts, native
from .checks import identity_test
from .guard import (
    DICT_KEYS_MATCH, GLOBAL_HOOKS_EMPTY, ID_MATCH, LENGTH_MATCH, MODULE_STATE_MATCH, TYPE_MATCH, Guard,
)
from .planner import STRUCTURE, Block, Planner, Read, Test, local_var, read_uses
from .source import LocalSource

# Checks about the contents of containers: the variables they look at must be dicts or tuples.
_CONTENT_KINDS = {MODULE_STATE_MATCH, STRUCTURE, DICT_KEYS_MATCH, LENGTH_MATCH, GLOBAL_HOOKS_EMPTY}
# Below this many skipped checks the memo costs more than it saves.
MIN_SKIPPED = 8


@dataclasses.dataclass
class MemoPlan:
    pins: dict[str, str]          # argument variable -> name of the pinned object
    stable: set[str]              # variables the memo vouches for
    owners: dict[str, str]        # stable X.__dict__ variable -> X
    containers: set[str]          # stable variables that must be dicts or tuples
    skipped: list                 # steps the fast path leaves out
    typed: set = dataclasses.field(default_factory=set)      # ids of the type checks the memo re-checks
    memo: str = ""                # name of the DictMemo in the generated code
    values: list = dataclasses.field(default_factory=list)   # stable variables the fast path needs
    namespace: dict = dataclasses.field(default_factory=dict)   # the generated code's constants
    const_dicts: list = dataclasses.field(default_factory=list)  # names of dict constants begin() notes


def plan_memo(planner: Planner, guards: list[Guard]) -> Optional[MemoPlan]:
    """Which steps a memo lets the fast path skip, or None when it is not worth it."""
    if not native.compiled() or native.DictMemo is None:
        return None
    pins = {local_var(g.source.local_name): planner.consts.name_for(g.obj, "pin")
            for g in guards if g.kind == ID_MATCH and isinstance(g.source, LocalSource)}
    if not pins:
        return None
    plan = MemoPlan(pins, set(pins), {}, set(), [], namespace=planner.consts.namespace)
    _classify(planner.steps, plan)
    if sum(isinstance(step, (Test, Block)) for step in plan.skipped) < MIN_SKIPPED:
        return None
    plan.memo = planner.consts.name_for(native.DictMemo(), "memo")
    return plan


def _classify(steps: list, plan: MemoPlan) -> None:
    for step in steps:
        if isinstance(step, Read):
            how = step.how or ("",)
            if how[0] == "attr" and how[2] == "__dict__" and how[1] in plan.stable:
                plan.stable.add(step.var)
                plan.owners[step.var] = how[1]
                plan.skipped.append(step)
            elif how[0] in ("item", "builtin") and all(_stable_dict(plan, base) for base in _bases(how)):
                plan.stable.add(step.var)
                plan.skipped.append(step)
            elif how[0] == "const":   # a constant the plan names: the same object every call
                plan.stable.add(step.var)
                plan.skipped.append(step)
        elif isinstance(step, Block):
            if step.uses <= plan.stable:
                plan.skipped.append(step)   # an immutable constant, identical: all of it holds
                _classify(step.steps, plan)  # (its reads stay stable for the slow path's notes)
            else:
                _classify(step.steps, plan)
        elif step.by_identity or step.kind == TYPE_MATCH:
            used = step.uses
            if used <= plan.stable:
                plan.skipped.append(step)
                if step.kind in _CONTENT_KINDS:
                    plan.containers |= used
                if not step.by_identity:   # a class that may be reassigned: the memo notes it
                    plan.typed.add(id(step))


def _bases(how: tuple) -> tuple:
    """The containers a read looks into: ``B`` of ``B[k]``; the globals and builtins of a builtin's lookup."""
    return how[1:2] if how[0] == "item" else how[1:3]


def _stable_dict(plan: MemoPlan, base: str) -> bool:
    """Whether the memo can vouch for what ``base`` holds (and make sure it keeps vouching): a
    stable variable, which must then be a dict or a tuple, or a dict constant, noted at begin()."""
    if base in plan.stable:
        plan.containers.add(base)
        return True
    if type(plan.namespace.get(base)) is dict:
        if base not in plan.const_dicts:
            plan.const_dicts.append(base)
        return True
    return False


def fast_path_steps(plan: MemoPlan, planner: Planner) -> tuple[list, list[str]]:
    """The steps the fast path still runs (the volatile ones) and the stable variables they
    need from the memo's committed values, in order (also kept as ``plan.values``)."""
    skipped = {id(step) for step in plan.skipped}
    volatile = _without(planner.steps, skipped)
    plan.values = sorted(_uses(volatile) & plan.stable - set(plan.pins), key=_var_order)
    return volatile, plan.values


def render_fast_path(plan: MemoPlan, planner: Planner, render_steps) -> list[str]:
    """The lines of the memo's fast path (``render_steps`` renders the volatile steps)."""
    volatile, needed = fast_path_steps(plan, planner)
    pins = " and ".join(identity_test(var, name, plan.namespace[name]) for var, name in plan.pins.items())
    lines = [f"        if {pins} and {plan.memo}.valid():  # nothing the skipped checks read through changed"]
    if needed:
        lines.append(f"            {', '.join(needed)}, = {plan.memo}.values")
    body: list[str] = []
    render_steps(volatile, body, " " * 12)
    lines += body + ["            return True"]
    return lines


def slow_path_notes(plan: MemoPlan, step) -> Optional[str]:
    """The note the full guard makes right after a Read, or right before a type Test
    (None if none is needed)."""
    if isinstance(step, Test):
        if id(step) not in plan.typed:
            return None
        (var,) = step.uses
        return f"{plan.memo}.note_type({var})"
    if step.var in plan.owners:
        return f"{plan.memo}.note_owner({plan.owners[step.var]}, {step.var})"
    if step.var in plan.containers:
        return f"{plan.memo}.note({step.var}, True)"
    return None


def begin_line(plan: MemoPlan, planner: Planner) -> str:
    hooks = [planner.consts.name_for(d, name.lstrip("_")) for name, d in module_facts.global_hook_dicts().items()]
    return f"        ___token = {plan.memo}.begin({', '.join(hooks + plan.const_dicts)})"


def commit_line(plan: MemoPlan) -> str:
    values = "".join(f"{var}, " for var in plan.values)
    return f"        {plan.memo}.commit(({values}), ___token)"


def _without(steps: list, skipped: set[int]) -> list:
    kept = []
    for step in steps:
        if id(step) in skipped:
            continue
        if isinstance(step, Block):
            step = step._replace(steps=_without(step.steps, skipped))
            if not step.steps:
                continue
        kept.append(step)
    return kept


def _uses(steps: list) -> set[str]:
    used: set[str] = set()
    for step in steps:
        if isinstance(step, Read):
            used |= read_uses(step)
        elif isinstance(step, Block):
            used |= step.uses | _uses(step.steps)
        else:
            used |= step.uses
            if step.batched is not None:
                used.add(step.batched[0])
    return used


def _var_order(var: str) -> tuple:
    return (0, int(var[1:])) if var[1:].isdigit() else (1, var)
