"""minidynamo fuzz repro: seed 158 index 1557.

grad: eager ok , optimized raise RuntimeError

Run from the repository root:  PJRT_DEVICE=CPU python tests/fuzz/repros/repro_s158_i1557.py
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

def f(x, y, n):
    t2 = MOD(y)
    t1 = t2 * MOD.scale + MOD.shift
    return t1
'''

STEPS = [('exec', 'MOD.shift = torch.tensor(1.0, dtype=torch.float64)'),
 ('call',
  {'B': 3,
   'C': 3,
   'alias': False,
   'dtype': 'float32',
   'grad': False,
   'n': 0,
   'nts': 0,
   'reuse': False,
   'seed': 777,
   'view': False,
   'xs': []})]

if __name__ == "__main__":
    print(run_script(SOURCE, STEPS, 'torchxla_trace_once'))
