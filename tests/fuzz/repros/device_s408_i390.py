"""minidynamo fuzz repro: seed 408 index 390.

grad: input 0: eager tensor(-0.6987), optimized tensor(nan)

Run from the repository root:  PJRT_DEVICE=CPU python tests/fuzz/repros/device_s408_i390.py
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
import sys

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

def f(x, y, n, xs, ts):
    t1 = MOD(y)
    t2 = x * t1
    t3 = t2.std(dim=())
    i4 = len(xs) if t2.mean().item() > 0 else n
    t3 = helper_add(t3, t3)
    return t2
'''

STEPS = [('call',
  {'B': 3,
   'C': 3,
   'alias': False,
   'dtype': 'float32',
   'grad': False,
   'n': 0,
   'nts': 0,
   'reuse': False,
   'seed': 947,
   'view': False,
   'xs': []})]

if __name__ == "__main__":
    print(run_script(SOURCE, STEPS, 'torchxla_trace_once', device='xla'))
