"""Threads that save and restore the host generator's state through minidynamo do not deadlock.

torch's ``Generator.get_state`` wraps the state in a Python object while holding the generator's
mutex; the allocation may run the garbage collector, and a finalizer may hand the GIL to another
thread, which then waits for the mutex with the GIL held (``xla_bridge/generator_lock.py``).  The
programs below make that likely: garbage whose finalizers sleep is pending whenever the state is
read.  Each runs in a subprocess, so that a hang is a failed test, not a hung suite.  The tracer's
own reads and restores of the state are shown to go through the same lock."""

import os
import subprocess
import sys
import threading

import torch

import minidynamo
from xla_bridge.generator_lock import STATE_LOCK

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FINALIZERS_THAT_LET_GO = r'''
import gc, sys, threading, time
import torch

class Slow:
    """Garbage in a cycle whose finalizer sleeps: the collector runs it and lets go of the GIL."""
    def __init__(self):
        self.me = self
    def __del__(self):
        time.sleep(0.0005)

def leave_garbage():
    gc.disable()
    junk = [Slow() for _ in range(10)]
    del junk
    gc.enable()

gc.set_threshold(1)

def in_threads(work, n=4):
    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("done")
'''

THE_LOCKED_CALLS = FINALIZERS_THAT_LET_GO + r'''
from xla_bridge.generator_lock import cpu_state, cpu_state_kept, set_cpu_state

def work(i):
    for j in range(300):
        leave_garbage()
        set_cpu_state(cpu_state())
        leave_garbage()
        with cpu_state_kept():
            pass

in_threads(work)
'''

def run(program: str) -> str:
    env = dict(os.environ, PJRT_DEVICE="CPU", PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, "-c", program], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_saving_and_restoring_the_state_from_threads_finishes():
    assert run(THE_LOCKED_CALLS).strip().endswith("done")


def waits_for_the_lock(function, *args) -> bool:
    """Trace ``function`` on a thread while this one holds the lock: does the trace wait for it?
    (A trace that bypassed the lock would finish, and so the thread, well within the two seconds.)"""
    outcome = {}

    def trace():
        outcome["result"] = minidynamo.optimize("eager")(function)(*args)

    with STATE_LOCK:
        thread = threading.Thread(target=trace)
        thread.start()
        thread.join(timeout=2.0)
        waited = thread.is_alive()
    thread.join()
    assert torch.equal(outcome["result"], function(*args))
    return waited


def test_a_module_made_in_the_frame_is_made_under_the_lock():
    def f(x):
        return torch.nn.ReLU()(x) + 1      # the tracer makes the module, checking it draws nothing
    assert waits_for_the_lock(f, torch.randn(3))


def test_a_stand_in_run_of_an_op_is_made_under_the_lock():
    def f(x):
        return torch.bernoulli(x * 0 + 0.5).sum() > -1    # random, on a float16 tensor: asked of the CPU kernel

    assert waits_for_the_lock(f, torch.ones(3, dtype=torch.float16))
