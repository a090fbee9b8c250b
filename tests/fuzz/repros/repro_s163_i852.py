"""minidynamo fuzz repro: seed 163 index 852.

exception: eager raise, optimized ok (RuntimeError: Output 1 of SplitBackward0 is a view and is being modified inplace. This view is the output of a function that returns multiple views. Such functions do not allow the output views to be modified inplace. You should replace the inplace operation by an out-of-place one.)

Run from the repository root:  PJRT_DEVICE=CPU python tests/fuzz/repros/repro_s163_i852.py
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
    t1 = x * MOD.scale + MOD.shift
    t2 = MOD.act(t1)
    t3, *t4 = t2.chunk(2)
    t4 = t4[0] if t4 else t3
    t4.clamp_(-1, 1)
    return None
'''

STEPS = [('call',
  {'B': 3,
   'C': 4,
   'alias': False,
   'dtype': 'float32',
   'grad': False,
   'n': 0,
   'nts': 0,
   'reuse': False,
   'seed': 909,
   'view': False,
   'xs': []})]

if __name__ == "__main__":
    print(run_script(SOURCE, STEPS, 'torchxla_trivial'))
