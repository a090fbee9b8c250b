"""minidynamo fuzz repro: seed 21 index 114.

exception: eager ok, optimized raise (RuntimeError: The size of tensor a (3) must match the size of tensor b (2) at non-singleton dimension 1)

Run from the repository root:  PJRT_DEVICE=CPU python ../../tmp/fz/x21/repro_s21_i114.py
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
    t1 = y.clone()
    t2 = helper_add(t1, y)
    print(xs, xs, 'x')
    y.t_()
    t6 = t2 - t1
    return None
'''

STEPS = [('call',
  {'B': 2,
   'C': 3,
   'alias': False,
   'dtype': 'float32',
   'grad': False,
   'n': 0,
   'nts': 0,
   'reuse': False,
   'seed': 721,
   'view': False,
   'xs': []})]

if __name__ == "__main__":
    print(run_script(SOURCE, STEPS, 'torchxla_trace_once'))
