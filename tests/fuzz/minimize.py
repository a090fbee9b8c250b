"""Shrink a mismatching program: drop statements, steps and prelude blocks while the mismatch
(same category) persists, then write a standalone repro script."""

from __future__ import annotations

import copy
import re
import os
import pprint
from typing import Callable

import minidynamo
import torch

from .generator import Program, Stmt
from .limits import Bound
from .oracle import Outcome, run_program

# eager raising one of these means the candidate is not a program any more
BROKEN = ("NameError", "UnboundLocalError", "SyntaxError")
# A candidate may run this long and grow this much (see limits.py); the programs take well under a second.
CANDIDATE_SECONDS = 30.0
CANDIDATE_EXTRA_BYTES = 4 << 30


def _units(prog: Program) -> list[tuple]:
    """Paths to every removable statement: ("body", i, "body", j, ...)."""
    out = []

    def walk(stmts, path):
        for i, s in enumerate(stmts):
            if not _loop_counter(s):      # without it the while loop would never end
                out.append(path + (i,))
            if s.body is not None:
                walk(s.body, path + (i, "body"))
            if s.orelse is not None:
                walk(s.orelse, path + (i, "orelse"))
    walk(prog.body, ())
    return out


def _loop_counter(stmt) -> bool:
    """The ``cN += 1`` that ends a generated while loop (generator.s_while_loop)."""
    return stmt.body is None and len(stmt.lines) == 1 and re.fullmatch(r"c\d+ \+= 1", stmt.lines[0]) is not None


def _without(prog: Program, path: tuple) -> Program:
    p = copy.deepcopy(prog)
    stmts = p.body
    for key in path[:-1]:
        stmts = stmts[key] if isinstance(key, int) else getattr(stmts, key)
    del stmts[path[-1]]
    return p


def _unwrap(prog: Program, path: tuple) -> Program | None:
    """Replace a compound statement by its body (an `if` by its then-branch)."""
    p = copy.deepcopy(prog)
    stmts = p.body
    for key in path[:-1]:
        stmts = stmts[key] if isinstance(key, int) else getattr(stmts, key)
    s = stmts[path[-1]]
    if s.body is None or not s.lines[-1].startswith(("if ", "elif ")) or len(s.lines) != 1:
        return None
    stmts[path[-1]:path[-1] + 1] = s.body
    return p


def still_fails(prog: Program, category: str, backend, run=run_program, device: str = "cpu") -> bool:
    """The candidate still mismatches in ``category`` (one that runs past the bounds does not)."""
    dtype, grad = torch.get_default_dtype(), torch.is_grad_enabled()
    try:
        with Bound(CANDIDATE_SECONDS, CANDIDATE_EXTRA_BYTES) as bound:
            out: Outcome = run(prog.source(), prog.steps, backend, device=device)
    except Exception:   # noqa: BLE001
        return False
    if bound.exceeded:   # stopped anywhere, perhaps in the run's own clean-up: redo it
        torch.set_default_dtype(dtype)
        torch.set_grad_enabled(grad)
        minidynamo.reset()
        return False
    if out.setup_error or out.mismatch is None:
        return False
    if any(b in out.mismatch for b in BROKEN):
        return False
    return out.category == category


def minimize(prog: Program, category: str, backend="eager", budget: int = 300,
             check: Callable[[Program], bool] | None = None, device: str = "cpu") -> Program:
    """Greedy one-at-a-time removal to a fixpoint (programs are small), within ``budget`` runs."""
    check = check or (lambda p: still_fails(p, category, backend, device=device))
    runs = 0
    changed = True
    while changed and runs < budget:
        changed = False
        # steps: drop trailing ones first (the mismatch step must stay), then any
        i = len(prog.steps) - 1
        while i >= 0 and runs < budget:
            if len(prog.steps) > 1:
                cand = copy.deepcopy(prog)
                del cand.steps[i]
                runs += 1
                if check(cand):
                    prog, changed = cand, True
            i -= 1
        # statements, innermost last: try each path from the end
        for path in reversed(_units(prog)):
            if runs >= budget:
                break
            try:
                cand = _without(prog, path)
            except (IndexError, KeyError, TypeError):
                continue
            runs += 1
            if check(cand):
                prog, changed = cand, True
                continue
            cand = _unwrap(prog, path)
            if cand is not None:
                runs += 1
                if check(cand):
                    prog, changed = cand, True
        # the return value: a single name, then None
        for ret in _simpler_returns(prog.ret):
            if runs >= budget:
                break
            cand = copy.deepcopy(prog)
            cand.ret = ret
            runs += 1
            if check(cand):
                prog, changed = cand, True
                break
        # prelude blocks (imports stay)
        for i in range(len(prog.prelude) - 1, 0, -1):
            if runs >= budget:
                break
            cand = copy.deepcopy(prog)
            del cand.prelude[i]
            runs += 1
            if check(cand):
                prog, changed = cand, True
        # step specs: simplify the python arguments
        for i, (kind, spec) in enumerate(prog.steps):
            if kind != "call" or runs >= budget:
                continue
            for key, val in (("nts", 0), ("xs", []), ("n", 0)):
                if spec.get(key) == val:
                    continue
                cand = copy.deepcopy(prog)
                cand.steps[i][1][key] = val
                runs += 1
                if check(cand):
                    prog, changed = cand, True
    return prog


def _simpler_returns(ret: str) -> list[str]:
    out = ["None"]
    inner = ret.strip("()[]{},")
    if "," in inner or ret.startswith(("(", "[", "{")):
        for part in inner.split(","):
            part = part.strip()
            if part and ":" not in part:
                out.insert(0, part)
            elif ":" in part:
                out.insert(0, part.split(":", 1)[1].strip())
    return [r for r in out if r != ret]


REPRO_TEMPLATE = '''"""minidynamo fuzz repro: seed {seed} index {index}.

{mismatch}

Run from the repository root:  PJRT_DEVICE=CPU python {path}
Prints MISMATCH (eager and optimized differ) or OK.
"""
import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), {up!r})))

from tests.fuzz.oracle import run_script  # noqa: E402

SOURCE = {source}

STEPS = {steps}

if __name__ == "__main__":
    print(run_script(SOURCE, STEPS, {backend!r}, device={device!r}))
'''


def write_repro(prog: Program, mismatch: str, out_dir: str, backend="eager", name: str | None = None,
                device: str = "cpu") -> str:
    os.makedirs(out_dir, exist_ok=True)
    name = name or f"repro_s{prog.seed}_i{prog.index}.py"
    path = os.path.join(out_dir, name)
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    up = os.path.relpath(repo, os.path.abspath(out_dir))
    source = prog.source()
    text = REPRO_TEMPLATE.format(seed=prog.seed, index=prog.index, mismatch=mismatch.replace('"""', "'''"),
                                 path=os.path.relpath(path, repo), up=up,
                                 source="'''\\\n" + source.replace("\\", "\\\\").replace("'''", "\\'\\'\\'") + "'''",
                                 steps=pprint.pformat(prog.steps, width=110), backend=backend,
                                 device=device)
    with open(path, "w") as fh:
        fh.write(text)
    return path
