"""minidynamo fuzz repro: seed 181 index 114.

grad: input 0: eager tensor([[0., 1., 0.],         [0., 1., 1.]], dtype=torch.float64), optimized tensor([[0., 0., 0.],         [0., 1., 1.]], dtype=torch.float64)

Run from the repository root:  PJRT_DEVICE=CPU python tests/fuzz/repros/repro_s181_i114.py
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

class Obj:
    K = 3

    def __init__(self):
        self.k = 2
        self.w = 1.5
        self.flag = True
        self.items = [1, 2]
        self.act = torch.relu

    def scale(self, t):
        return t * self.k

    def bump(self, by=1):
        self.k = self.k + by
        return self.k

    def apply(self, t):
        return self.act(t)

    @property
    def double_k(self):
        return self.k * 2

OBJ = Obj()

def f(x, y, n, xs, ts):
    t7 = OBJ.apply(x)
    return t7
'''

STEPS = [('call',
  {'B': 2,
   'C': 3,
   'alias': False,
   'dtype': 'float64',
   'grad': True,
   'n': 0,
   'nts': 0,
   'reuse': False,
   'seed': 131,
   'special': [('x', 2, 1, 'nan'), ('y', 1, 4, 'nan')],
   'view': False,
   'xs': []})]

if __name__ == "__main__":
    print(run_script(SOURCE, STEPS, 'torchxla_trace_once'))
