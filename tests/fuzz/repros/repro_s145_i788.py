"""minidynamo fuzz repro: seed 145 index 788.

tensor: return.is_leaf: eager raises A view was created in no_grad mode and its base or another v, optimized True

Run from the repository root:  PJRT_DEVICE=CPU python tests/fuzz/repros/repro_s145_i788.py
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

@dataclasses.dataclass
class Pt:
    a: int
    b: int

def f(x, y, n, xs, ts):
    t3 = x.reshape(-1)
    t3.mul_(Pt(max(xs + [1]), 2).a * 0.5)
    return t3
'''

STEPS = [('exec', 'torch.set_grad_enabled(False)'),
 ('call',
  {'B': 3,
   'C': 3,
   'alias': False,
   'dtype': 'float32',
   'grad': True,
   'n': 0,
   'nts': 0,
   'reuse': False,
   'seed': 115,
   'view': True,
   'xs': []})]

if __name__ == "__main__":
    print(run_script(SOURCE, STEPS, 'torchxla_trace_once'))
