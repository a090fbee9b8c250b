"""minidynamo fuzz repro: seed 131 index 146.

grad: eager raise RuntimeError, optimized ok 

Run from the repository root:  PJRT_DEVICE=CPU python tests/fuzz/repros/repro_s131_i146.py
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

def f(x, y, n):
    xs = [n, 1, 2]
    i1 = min(xs + [n])
    t2 = helper_add(x, y)
    t7 = torch.maximum(t2, y)
    if bool(y.sum() > 0):
        pass
    t2[0] = i1 * 0.5
    return t7
'''

STEPS = [('call',
  {'B': 3,
   'C': 4,
   'alias': False,
   'dtype': 'float32',
   'grad': True,
   'n': 0,
   'nts': 0,
   'reuse': False,
   'seed': 626,
   'view': False,
   'xs': []})]

if __name__ == "__main__":
    print(run_script(SOURCE, STEPS, 'torchxla_trace_once'))
