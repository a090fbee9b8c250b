"""minidynamo fuzz repro: seed 4 index 4.

tensor: args[0].stride(): eager (1, 3), optimized (3, 1)

Run from the repository root:  PJRT_DEVICE=CPU python tests/fuzz/repros/repro_s4_i4.py
Prints MISMATCH (eager and optimized differ) or OK.
"""
import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), '../../..')))

from tests.fuzz.oracle import run_script  # noqa: E402

SOURCE = '''\
import torch
import dataclasses

def f(x, y, n):
    x.t_()
    return None
'''

STEPS = [('call',
  {'B': 3,
   'C': 3,
   'alias': False,
   'dtype': 'float32',
   'grad': False,
   'n': 0,
   'nts': 0,
   'reuse': False,
   'seed': 756,
   'view': False,
   'xs': []})]

if __name__ == "__main__":
    print(run_script(SOURCE, STEPS, 'torchxla_trace_once'))
