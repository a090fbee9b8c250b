"""minidynamo fuzz repro: seed 440 index 59.

value: G['LAYERS']['_modules.bn']['_buffers.running_var']: tensor values differ: eager tensor([0.7777, 0.4675]), optimized tensor([0.7957, 0.4764])

Run from the repository root:  PJRT_DEVICE=CPU python tests/fuzz/repros/device_s440_i59.py
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
    t6 = LAYERS['bn'](y[:, :2]).abs().mean(0)
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
   'seed': 326,
   'view': False,
   'xs': []}),
 ('exec', "LAYERS['bn'].momentum = None"),
 ('call',
  {'B': 2,
   'C': 4,
   'alias': False,
   'dtype': 'float32',
   'grad': False,
   'n': 0,
   'nts': 0,
   'reuse': False,
   'seed': 563,
   'shadow': ['size'],
   'view': False,
   'xs': []})]

if __name__ == "__main__":
    print(run_script(SOURCE, STEPS, 'torchxla_trace_once', device='xla'))
