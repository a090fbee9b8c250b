"""minidynamo fuzz repro: seed 439 index 35.

exception: eager raise, optimized ok (RuntimeError: Expected XLA tensor. Got: torch.LongTensor)

Run from the repository root:  PJRT_DEVICE=CPU python tests/fuzz/repros/device_s439_i35.py
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
    global G_SCALE
    t2 = x.index_fill(1, torch.tensor([0]), -1.0)
    return None
'''

STEPS = [('exec', 'MOD.scale.grad = torch.tensor(2.0)'),
 ('call',
  {'B': 3,
   'C': 4,
   'alias': False,
   'dtype': 'float32',
   'grad': True,
   'n': 0,
   'nts': 0,
   'reuse': False,
   'seed': 617,
   'view': False,
   'xs': []})]

if __name__ == "__main__":
    print(run_script(SOURCE, STEPS, 'torchxla_trace_once', device='xla'))
