"""minidynamo fuzz repro: seed 143 index 69.

aliasing: return[2]: eager and optimized disagree on which objects are the same

Run from the repository root:  PJRT_DEVICE=CPU python tests/fuzz/repros/repro_s143_i69.py
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
    t1, *t2 = x.chunk(2)
    t2 = t2[0] if t2 else t1
    return (t2, n, t1, x,)
    return None
'''

STEPS = [('call',
  {'B': 1,
   'C': 3,
   'alias': False,
   'dtype': 'float32',
   'grad': False,
   'n': 0,
   'nts': 0,
   'reuse': False,
   'seed': 856,
   'shadow': ['sum', 'size', 'dim', 'abs'],
   'view': False,
   'xs': []})]

if __name__ == "__main__":
    print(run_script(SOURCE, STEPS, 'torchxla_trace_once'))
