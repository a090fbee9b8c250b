"""minidynamo fuzz repro: seed 170 index 826.

exception: eager raise, optimized ok (NotImplementedError: "check_uniform_bounds" not implemented for 'Long')

Run from the repository root:  PJRT_DEVICE=CPU python tests/fuzz/repros/repro_s170_i826.py
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

G_SCALE = 2
G_W = 0.5
G_LIST = [1, 2]
G_DICT = {'a': 1, 'b': 2}

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

def f(x, y, n, ts):
    t5 = torch.where(y > 0, y, y * y.max().item())
    tf6 = torch.arange(max(n, 0) + 1)
    OBJ.last = t5 * 2
    OBJ.k = OBJ.k + 1
    G_DICT['gb'] = n
    operator.length_hint(G_LIST)
    tf6 = tf6 + torch.rand_like(tf6)
    return None
'''

STEPS = [('call',
  {'B': 3,
   'C': 4,
   'alias': False,
   'dtype': 'float32',
   'grad': True,
   'n': 0,
   'nts': 0,
   'reuse': False,
   'seed': 148,
   'view': False,
   'xs': []})]

if __name__ == "__main__":
    print(run_script(SOURCE, STEPS, 'torchxla_trace_once'))
