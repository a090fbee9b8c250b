"""minidynamo fuzz repro: seed 5057 index 1.

exception: eager raise, optimized ok (RuntimeError: Autograd not support dtype: Long)

Run from the repository root:  PJRT_DEVICE=CPU python tests/fuzz/repros/device_s5057_i1.py
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

def f(x, y, n, ts):
    t4 = (x * 3).clamp(-1e6, 1e6).nan_to_num(0.0).long() // 2
    t6 = LAYERS['lin'](t4[:, :2])
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
   'seed': 543,
   'view': False,
   'xs': []})]

if __name__ == "__main__":
    print(run_script(SOURCE, STEPS, 'torchxla_trace_once', device='xla'))
