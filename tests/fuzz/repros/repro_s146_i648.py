"""minidynamo fuzz repro: seed 146 index 648.

tensor: return.dtype: eager torch.float64, optimized torch.float32

Run from the repository root:  PJRT_DEVICE=CPU python tests/fuzz/repros/repro_s146_i648.py
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

def f(x, y, n, xs, ts):
    t3 = (y > 0).float()
    t4 = torch.where(x > 0, t3, x)
    return t4
'''

STEPS = [('call',
  {'B': 3,
   'C': 4,
   'alias': False,
   'dtype': 'float64',
   'grad': False,
   'n': 0,
   'nts': 0,
   'reuse': False,
   'seed': 461,
   'view': False,
   'xs': []})]

if __name__ == "__main__":
    print(run_script(SOURCE, STEPS, 'torchxla_trivial'))
