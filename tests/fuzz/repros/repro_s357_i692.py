"""minidynamo fuzz repro: seed 357 index 692.

worker exited 1 on this program (torchxla_trace_once): the graph raised inside an inference-mode block the bridge ran in a dispatch mode of its own, and leaving the block after that mode put the mode's dispatch state back for good

Run from the repository root:  PJRT_DEVICE=CPU python tests/fuzz/repros/repro_s357_i692.py
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

G_SCALE = 2
G_W = 0.5
G_LIST = [1, 2]
G_DICT = {'a': 1, 'b': 2}

def helper_add(a, b=1, *, scale=1):
    return a * scale + b

def helper_tensor(t, k=2):
    return t.relu() * k

def helper_pair(t, s=1.0):
    return t + s, t - s

def helper_var(*args, **kwargs):
    return len(args) + len(kwargs)

def helper_append(lst, v=0):
    lst.append(v)
    return len(lst)

def helper_print(t, k=2):
    u = t * k
    print('helper', u.shape)
    return u + 1

def helper_log(lst, t):
    lst.append(len(lst))
    u = t.sin()
    print('log', len(lst), u.shape)
    if u.sum() > 0:
        return u * 2
    return u - 1

class Obj:
    K = 3

    def __init__(self):
        self.k = 2
        self.w = 1.5
        self.flag = True
        self.items = [1, 2]
        self.act = torch.relu

    def scale(self, t):
        return t * self.k

    def bump(self, by=1):
        self.k = self.k + by
        return self.k

    def apply(self, t):
        return self.act(t)

    @property
    def double_k(self):
        return self.k * 2

OBJ = Obj()

class Mod(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.tensor(1.5))
        self.register_buffer("shift", torch.tensor(0.25))
        self.act = torch.nn.ReLU()
        self.count = 0
        self.enabled = True

    def forward(self, t):
        out = self.act(t) * self.scale + self.shift
        if self.enabled:
            out = out + 1
        return out

MOD = Mod()

@dataclasses.dataclass
class Pt:
    a: int
    b: int

import itertools
import functools

def gen_accumulate(start):
    total = start
    while True:
        sent = yield total
        if sent is None:
            return total * 2
        total = total + sent

def gen_relay(start):
    result = yield from gen_accumulate(start)
    yield result + 1

def gen_count(k):
    for i in range(k):
        yield i * 2

def gen_tensors(t, k=2):
    for i in range(k):
        yield t * (i + 1)

def gen_from(lst, extra=0):
    yield from lst
    yield len(lst) + extra

def gen_pairs(lst):
    prev = None
    for v in lst:
        if prev is not None:
            yield prev, v
        prev = v

def gen_until(lst, stop=2):
    for v in lst:
        if v > stop:
            return
        yield v

def gen_print(lst):
    for v in lst:
        print('gen', v)
        yield v + 1

def gen_nested(t, lst):
    yield t
    yield from gen_tensors(t, len(lst) % 3)
    yield -t

def scaled(t, k, *, bias=0.0):
    return t * k + bias

torch.manual_seed(0)
LAYERS = torch.nn.ModuleDict({
    "lin": torch.nn.Linear(2, 3), "ln": torch.nn.LayerNorm(2), "bn": torch.nn.BatchNorm1d(2),
    "gn": torch.nn.GroupNorm(1, 2), "emb": torch.nn.Embedding(5, 3), "drop": torch.nn.Dropout(0.25),
    "gru": torch.nn.GRU(2, 3, batch_first=True), "conv": torch.nn.Conv1d(1, 2, 2),
})

def f(x, y, n, ts):
    xs = [n, 1, 2]
    t2 = y.triu(1)
    t3 = torch.where(y > 0, x, y)
    pr4 = list(itertools.pairwise(xs))
    i5 = (max(xs + [0], key=lambda v: -v) // 2)
    t3.mul_(1.5)
    i5 += 3
    t3.mul_(MOD.count * 0.5)
    for v6, w7 in zip(xs, xs):
        for k8 in range(1, n):
            t9 = x.view(-1)
        OBJ.k = sum(xs)
        t11 = t3[[0, -1]]
    OBJ.items.pop() if OBJ.items else None
    if n > t2.numel() % 5:
        try:
            i13 = {'a': 1}['b']
        except Exception as e18:
            tl16 = [x]
            print('handling', sys.exc_info()[0].__name__, e18.__context__ is None)
            t17 = sum([u.relu() for u in ts], torch.zeros_like(y))
    t19 = torch.nn.functional.dropout(t2, 0.3, MOD.training)
    t20 = x.reshape(-1)
    t22 = t3.softmax(dim=0)
    with torch.inference_mode(n > 1):
        fn23 = lambda v, k=0: v * min(xs + [1], key=lambda v: v % 3) + k
        t24 = fn23(x)
        t25 = LAYERS['gn'](y[:, :2])
        t26 = torch.nn.functional.dropout(t19, p=0.5, training=True)
    l27 = [v * 2 for v in xs if v != 3]
    return x
'''

STEPS = [('call',
  {'B': 2,
   'C': 3,
   'alias': False,
   'dtype': 'float32',
   'grad': False,
   'n': 2,
   'nts': 0,
   'reuse': False,
   'seed': 415,
   'view': False,
   'xs': []}),
 ('call',
  {'B': 2,
   'C': 3,
   'alias': False,
   'dtype': 'float64',
   'grad': False,
   'n': 2,
   'nts': 0,
   'reuse': False,
   'seed': 910,
   'view': False,
   'xs': []}),
 ('call',
  {'B': 2,
   'C': 3,
   'alias': False,
   'dtype': 'float32',
   'grad': False,
   'n': 2,
   'nts': 2,
   'reuse': False,
   'seed': 740,
   'view': False,
   'xs': []}),
 ('call',
  {'B': 2,
   'C': 3,
   'alias': False,
   'dtype': 'float32',
   'grad': False,
   'n': 2,
   'nts': 2,
   'reuse': False,
   'seed': 651,
   'view': True,
   'xs': []}),
 ('exec', 'OBJ = Obj()')]

if __name__ == "__main__":
    print(run_script(SOURCE, STEPS, 'torchxla_trace_once', device='cpu'))
