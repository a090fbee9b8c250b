"""minidynamo fuzz repro: seed 141 index 584.

grad: input 1: eager None, optimized a gradient

Run from the repository root:  PJRT_DEVICE=CPU python tests/fuzz/repros/repro_s141_i584.py
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

class Mod(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.tensor(1.5))
        self.register_buffer("shift", torch.tensor(0.25))
        self.act = torch.nn.ReLU()
        self.count = 0
        self.enabled = True

    def forward(self, t):
        out = self.act(t) * self.scale + self.shift
        if self.enabled:
            out = out + 1
        return out

MOD = Mod()

def f(x, y, n, xs):
    t8 = MOD(x)
    t7 = helper_tensor(x)
    c21 = 0
    while c21 < n:
        t22 = torch.cat([t7, t7], dim=0)
        b23 = bool(t22.sum() > 0) and n > 1
        c21 += 1
    for j25, v24 in enumerate(xs):
        t8 *= 2
    return t7
'''

STEPS = [('call',
  {'B': 2,
   'C': 4,
   'alias': False,
   'dtype': 'float32',
   'grad': True,
   'n': 3,
   'nts': 0,
   'reuse': False,
   'seed': 797,
   'view': False,
   'xs': []})]

if __name__ == "__main__":
    print(run_script(SOURCE, STEPS, 'torchxla_trace_once'))
