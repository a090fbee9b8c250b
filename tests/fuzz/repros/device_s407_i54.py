"""minidynamo fuzz repro: seed 407 index 54.

grad: eager ok , optimized raise RuntimeError

Run from the repository root:  PJRT_DEVICE=CPU python tests/fuzz/repros/device_s407_i54.py
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
    t2 = y - y
    t3 = MOD(y)
    t5 = t2 / (t3.abs() + 1)
    t7 = MOD(t3) if MOD.enabled else t3
    print('one', t7.shape)
    print('two', t2.dim())
    t8 = t5 * MOD.scale + MOD.shift
    t3.copy_(torch.tensor(0.5, device=t3.device))
    return t7
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
   'seed': 450,
   'view': False,
   'xs': []})]

if __name__ == "__main__":
    print(run_script(SOURCE, STEPS, 'torchxla_trace_once', device='xla'))
