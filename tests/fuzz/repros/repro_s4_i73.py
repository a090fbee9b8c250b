"""minidynamo fuzz repro: seed 4 index 73.

tensor: return.dtype: eager torch.float32, optimized torch.float64

Run from the repository root:  PJRT_DEVICE=CPU python tests/fuzz/repros/repro_s4_i73.py
Prints MISMATCH (eager and optimized differ) or OK.
"""
import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), '../../..')))

from tests.fuzz.oracle import run_script  # noqa: E402

SOURCE = '''\
import torch
import dataclasses

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
    t4 = MOD(y)
    fn12 = lambda v, k=1: v * helper_var(helper_add(1, b=2), 1, z=2) + k
    t13 = fn12(t4)
    return t13
'''

STEPS = [('exec', 'MOD.shift = torch.tensor(1.0, dtype=torch.float64)'),
 ('call',
  {'B': 2,
   'C': 3,
   'alias': False,
   'dtype': 'float32',
   'grad': False,
   'n': 0,
   'nts': 0,
   'reuse': False,
   'seed': 965,
   'view': False,
   'xs': []})]

if __name__ == "__main__":
    print(run_script(SOURCE, STEPS, 'torchxla_trace_once'))
