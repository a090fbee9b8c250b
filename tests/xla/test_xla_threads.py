"""Threads calling one compiled function: torch_xla's lazy tensors are per device, not per thread,
and a device step's ``sync()`` runs every pending tensor of the device, another thread's
half-traced ones included.  Without one step at a time (``device.DEVICE_STEP``) the process
aborted ("PjRt buffer is null in TransferFromDevice") in about half the runs of this program;
it runs in a subprocess, so that an abort is a failure, not the end of the suite."""

import os
import subprocess
import sys

import pytest

PROGRAM = r'''
import sys, threading
import torch
import minidynamo

def f(x, k):
    y = x * k
    if y.sum() > 0:      # a graph break: two graphs per call, more device steps to interleave
        y = y + 1
    return y * 2

compiled = minidynamo.optimize(sys.argv[1])(f)
wrong = []

def worker(seed):
    for j in range(150):
        k = (seed + j) % 5
        x = torch.randn(3, generator=torch.Generator().manual_seed(j % 7))
        if not torch.allclose(compiled(x, k), f(x, k), rtol=1e-6, atol=1e-6):
            wrong.append((seed, j))

threads = [threading.Thread(target=worker, args=(s,)) for s in range(6)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("wrong", len(wrong))
'''


@pytest.mark.parametrize("backend", ["torchxla_trivial", "torchxla_trace_once"])
def test_threads_calling_one_compiled_function_get_eagers_answers(backend):
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PJRT_DEVICE="CPU", PYTHONPATH=repo)
    for _ in range(2):
        run = subprocess.run([sys.executable, "-c", PROGRAM, backend], capture_output=True, text=True,
                             env=env, cwd=repo, timeout=600)
        assert run.returncode == 0, run.stderr[-2000:]
        assert run.stdout.strip().endswith("wrong 0"), run.stdout
