"""minidynamo fuzz repro: seed 153 index 893.

grad: eager ok , optimized raise RuntimeError

Run from the repository root:  PJRT_DEVICE=CPU python tests/fuzz/repros/repro_s153_i893.py
Prints MISMATCH (eager and optimized differ) or OK.
"""
import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), '../../..')))

from tests.fuzz.oracle import run_script  # noqa: E402

SOURCE = '''\
import torch
import dataclasses
import operator

def helper_add(a, b=1, *, scale=1):
    return a * scale + b

def helper_tensor(t, k=2):
    return t.relu() * k

def helper_pair(t, s=1.0):
    return t + s, t - s

def helper_var(*args, **kwargs):
    return len(args) + len(kwargs)

def helper_append(lst, v=0):
    lst.append(v)
    return len(lst)

def helper_print(t, k=2):
    u = t * k
    print('helper', u.shape)
    return u + 1

def helper_log(lst, t):
    lst.append(len(lst))
    u = t.sin()
    print('log', len(lst), u.shape)
    if u.sum() > 0:
        return u * 2
    return u - 1

def f(x, y, n, xs, ts):
    t1 = x / (y.abs() + 1)
    c2 = 0
    while c2 < len(xs) + 1:
        t1.relu_()
        c2 += 1
    fn6 = lambda v, k=2: v * n + k
    t7 = fn6(x)
    i8 = operator.length_hint(xs) + n
    t9, t10 = helper_pair(t7)
    t1.sub_(1)
    return t9
'''

STEPS = [('call',
  {'B': 2,
   'C': 3,
   'alias': False,
   'dtype': 'float32',
   'grad': True,
   'n': 0,
   'nts': 0,
   'reuse': False,
   'seed': 346,
   'view': False,
   'xs': [0, 2]})]

if __name__ == "__main__":
    print(run_script(SOURCE, STEPS, 'torchxla_trace_once'))
