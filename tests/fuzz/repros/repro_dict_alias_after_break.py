"""Fixed in the twenty-seventh session (older than it): a value a graph break's eager
instruction returns may be another input's attribute dict, which the resume function did not
know.  Here ``get(o)`` prints (a break at the CALL) and returns ``o.__dict__``; the resume
function stores into that dict through its stack value, then reads ``o.m`` through ``o``, as
traced, from before the store: eager returned 2, minidynamo 0.  Now an attribute read or store
on an object whose ``__dict__`` the trace wrote as a dict is refused (and the converse).

Run from the repository root:  python tests/fuzz/repros/open_dict_alias_after_break.py
Prints MISMATCH or OK.
"""
import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), '../../..')))

import torch  # noqa: E402

import minidynamo  # noqa: E402


class Obj:
    def __init__(self):
        self.n, self.m = 0, 0


def get(o):
    print("get")
    return o.__dict__


def f(x, o):
    o.n += 1
    d = get(o)
    d["m"] = o.n * 2
    return x + 1, o.m


if __name__ == "__main__":
    want = f(torch.ones(1), Obj())[1]
    got = minidynamo.optimize("eager")(f)(torch.ones(1), Obj())[1]
    print("OK" if got == want else f"MISMATCH: eager {want}, minidynamo {got}")
