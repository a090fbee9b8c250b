"""minidynamo fuzz repro: seed 4 index 28.

tensor: args[0].requires_grad: eager True, optimized False

Run from the repository root:  PJRT_DEVICE=CPU python tests/fuzz/repros/repro_s4_i28.py
Prints MISMATCH (eager and optimized differ) or OK.
"""
import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), '../../..')))

from tests.fuzz.oracle import run_script  # noqa: E402

SOURCE = '''\
import torch
import dataclasses

def f(x, y, n, xs):
    x.requires_grad_(not x.requires_grad) if x.is_leaf else None
    return None
'''

STEPS = [('call',
  {'B': 2,
   'C': 4,
   'alias': False,
   'dtype': 'float32',
   'grad': False,
   'n': 0,
   'nts': 0,
   'reuse': False,
   'seed': 227,
   'view': False,
   'xs': []})]

if __name__ == "__main__":
    print(run_script(SOURCE, STEPS, 'torchxla_trace_once'))
