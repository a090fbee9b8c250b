"""minidynamo fuzz repro: seed 158 index 1453.

value: return: tensor values differ: eager tensor([[ 0.6118, -0.1889, -0.5262],         [ 0.8308, -0.7199, -1.2224]]), optimized tensor([[ 1.3766, -0.4249, -1.1839],         [ 1.8693, -1.6198, -2.7505]])

Run from the repository root:  PJRT_DEVICE=CPU python tests/fuzz/repros/repro_s158_i1453.py
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

def f(x, y, n):
    xs = [n, 1, 2]
    t1 = x.clone()
    for v2, w3 in zip(xs, G_LIST):
        x.mul_(1.5)
    return t1
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
   'seed': 322,
   'view': False,
   'xs': []})]

if __name__ == "__main__":
    print(run_script(SOURCE, STEPS, 'torchxla_trace_once'))
