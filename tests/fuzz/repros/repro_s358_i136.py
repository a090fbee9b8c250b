"""minidynamo fuzz repro: seed 358 index 136.

value: args[3]: length eager 1, optimized 0: [0] vs []

Run from the repository root:  PJRT_DEVICE=CPU python tests/fuzz/repros/repro_s358_i136.py
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

G_SCALE = 2
G_W = 0.5
G_LIST = [1, 2]
G_DICT = {'a': 1, 'b': 2}

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
    t1 = x.reshape(-1)
    (MOD(x) * x).mean().backward()
    xs[1:] = [n]
    for key9, v8 in G_DICT.items():
        i10, *l11 = [max(xs + [0], key=lambda v: -v), *xs]
        if l11 is xs:
            pass
        else:
            t1.add_(t1)
    return None
'''

STEPS = [('call',
  {'B': 2,
   'C': 4,
   'alias': False,
   'dtype': 'float32',
   'grad': True,
   'n': 0,
   'nts': 0,
   'reuse': False,
   'seed': 903,
   'view': False,
   'xs': []})]

if __name__ == "__main__":
    print(run_script(SOURCE, STEPS, 'torchxla_trace_once', device='cpu'))
