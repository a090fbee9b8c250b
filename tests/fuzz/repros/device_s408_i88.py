"""minidynamo fuzz repro: seed 408 index 88.

grad: eager ok , optimized raise RuntimeError

Run from the repository root:  PJRT_DEVICE=CPU python tests/fuzz/repros/device_s408_i88.py
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

def f(x, y, n, xs):
    t1 = MOD(x)
    t2 = t1 - y
    t3 = t2.relu()
    print('one', y.shape)
    print('two', n)
    t3.relu_()
    return t1
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
   'seed': 320,
   'view': False,
   'xs': []})]

if __name__ == "__main__":
    print(run_script(SOURCE, STEPS, 'torchxla_trace_once', device='xla'))
