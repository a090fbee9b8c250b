"""minidynamo fuzz repro: seed 171 index 566.

exception: eager ok, optimized raise (RuntimeError: Executable expected parameter 0 of size 4 but got buffer with incompatible size 24)

Run from the repository root:  PJRT_DEVICE=CPU python tests/fuzz/repros/repro_s171_i566.py
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

def f(x, y, n, xs):
    x.copy_(torch.tensor(0.5))
    f3 = float(x.sum()) * 2 + n
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
   'seed': 524,
   'view': False,
   'xs': []})]

if __name__ == "__main__":
    print(run_script(SOURCE, STEPS, 'torchxla_trace_once'))
