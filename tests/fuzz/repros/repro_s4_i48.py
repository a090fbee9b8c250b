"""minidynamo fuzz repro: seed 4 index 48.

exception: eager ok, optimized raise (RuntimeError: The size of tensor a (3) must match the size of tensor b (2) at non-singleton dimension 1)

Run from the repository root:  PJRT_DEVICE=CPU python tests/fuzz/repros/repro_s4_i48.py
Prints MISMATCH (eager and optimized differ) or OK.
"""
import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), '../../..')))

from tests.fuzz.oracle import run_script  # noqa: E402

SOURCE = '''\
import torch
import dataclasses

def f(x, y, n, xs, ts):
    y.t_()
    return None
'''

STEPS = [('call',
  {'B': 2,
   'C': 3,
   'alias': False,
   'dtype': 'float32',
   'grad': False,
   'n': 0,
   'nts': 0,
   'reuse': False,
   'seed': 475,
   'view': False,
   'xs': []})]

if __name__ == "__main__":
    print(run_script(SOURCE, STEPS, 'torchxla_trace_once'))
