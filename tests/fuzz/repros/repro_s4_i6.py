"""minidynamo fuzz repro: seed 4 index 6.

exception: eager raise, optimized ok (IndexError: index 7 is out of bounds for dimension 0 with size 3)

Run from the repository root:  PJRT_DEVICE=CPU python tests/fuzz/repros/repro_s4_i6.py
Prints MISMATCH (eager and optimized differ) or OK.
"""
import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), '../../..')))

from tests.fuzz.oracle import run_script  # noqa: E402

SOURCE = '''\
import torch
import dataclasses

G_SCALE = 2
G_W = 0.5
G_LIST = [1, 2]
G_DICT = {'a': 1, 'b': 2}

def f(x, y, n):
    xs = [n, 1, 2]
    for v2 in xs:
        for k4 in range(1):
            G_LIST.append(n)
            t6 = x[torch.tensor([7])]
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
   'seed': 60,
   'view': False,
   'xs': []})]

if __name__ == "__main__":
    print(run_script(SOURCE, STEPS, 'torchxla_trace_once'))
