"""minidynamo fuzz repro: seed 5057 index 78.

value: return: tensor values differ: eager tensor([[-0.0000e+00, -6.5967e-05],         [-3.2153e-02, -0.0000e+00],         [-2.6738e-01, -1.1827e+00]]), optimized tensor([[-0.0000e+00, -6.5967e-05],         [-3.2153e-02, -2.2340e-03],         [-0.0000e+00, -1.1827e+00]])

Run from the repository root:  PJRT_DEVICE=CPU python tests/fuzz/repros/device_s5057_i78.py
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
import sys

torch.manual_seed(0)
LAYERS = torch.nn.ModuleDict({
    "lin": torch.nn.Linear(2, 3), "ln": torch.nn.LayerNorm(2), "bn": torch.nn.BatchNorm1d(2),
    "gn": torch.nn.GroupNorm(1, 2), "emb": torch.nn.Embedding(5, 3), "drop": torch.nn.Dropout(0.25),
    "gru": torch.nn.GRU(2, 3, batch_first=True), "conv": torch.nn.Conv1d(1, 2, 2),
})

def f(x, y, n, xs):
    t1 = y * y
    t2 = t1 ** 2
    t3 = t1 @ y.t()
    print('gb', t1.detach().round(decimals=2))
    t4 = -t2
    t5 = LAYERS['drop'](t4[:, :2])
    t6 = x[0]
    t6 *= 2
    return t5
'''

STEPS = [('call',
  {'B': 3,
   'C': 3,
   'alias': False,
   'dtype': 'float32',
   'grad': True,
   'n': 0,
   'nts': 0,
   'reuse': False,
   'seed': 284,
   'view': False,
   'xs': []}),
 ('call',
  {'B': 3,
   'C': 3,
   'alias': False,
   'dtype': 'float32',
   'grad': False,
   'n': 0,
   'nts': 0,
   'reuse': False,
   'seed': 992,
   'view': False,
   'xs': []})]

if __name__ == "__main__":
    print(run_script(SOURCE, STEPS, 'torchxla_trace_once', device='xla'))
