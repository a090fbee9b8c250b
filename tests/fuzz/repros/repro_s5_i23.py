"""minidynamo fuzz repro: seed 5 index 23.

tensor: return.storage_offset(): eager 8, optimized 0

Run from the repository root:  PJRT_DEVICE=CPU python tests/fuzz/repros/repro_s5_i23.py
Prints MISMATCH (eager and optimized differ) or OK.
"""
import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), '../../..')))

from tests.fuzz.oracle import run_script  # noqa: E402

SOURCE = '''\
import torch
import dataclasses

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

def f(x, y, n, xs):
    t2 = OBJ.act(y)
    t12, *t13 = t2.chunk(2)
    t13 = t13[0] if t13 else t12
    return t13
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
   'seed': 764,
   'view': False,
   'xs': []})]

if __name__ == "__main__":
    print(run_script(SOURCE, STEPS, 'torchxla_trace_once'))
