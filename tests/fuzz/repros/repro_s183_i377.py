"""minidynamo fuzz repro: seed 183 index 377.

value: return: tensor values differ: eager tensor([[ 0.2440,     inf, -0.3604,  1.5557],         [ 0.8059, -0.3622, -0.5000,  0.5573],         [ 1.0099, -0.5000, -..., optimized tensor([[ 2.4398e-01,  3.4028e+38, -3.6039e-01,  1.5557e+00],         [ 8.0594e-01, -3.6217e-01, -5.0000e-01,  5.5725e-0...

Run from the repository root:  PJRT_DEVICE=CPU python tests/fuzz/repros/repro_s183_i377.py
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
    global G_W
    t10 = y.clamp(min=-0.5)
    return t10
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
   'seed': 676,
   'special': [('y', 3, 1, 'inf'), ('x', 0, 3, '1e30')],
   'view': False,
   'xs': []})]

if __name__ == "__main__":
    print(run_script(SOURCE, STEPS, 'torchxla_trivial'))
