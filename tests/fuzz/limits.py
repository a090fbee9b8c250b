"""Bounds for running a candidate program in this process: wall-clock time and memory.

The minimizer runs hundreds of variants of a mismatching program, each made by deleting a
statement, in the process that found it.  A deletion can take away what kept the program small
(a slice that bounded a loop's list, a cap on a repeat count): the variant then spins, or grows
its tensors until the machine runs out of memory.  ``bounded`` stops such a variant.

A watchdog thread samples the clock and the resident set size; past a limit it interrupts the
main thread (``_thread.interrupt_main``: a KeyboardInterrupt at the next bytecode boundary, no
real signal, so the runtime's own threads are never interrupted), and again every second until
the block is left: a handler in the program that swallows one interrupt does not keep it alive,
and the run's own clean-up (a ``finally``) has time to finish.
The caller learns of it from ``Bound.exceeded``; a real Ctrl-C (nothing exceeded) still stops
the run.
"""

from __future__ import annotations

import _thread
import os
import signal
import threading
import time
from typing import Optional

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def resident_bytes() -> int:
    """This process's resident set size (0 where /proc is missing: memory is then not bounded)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


class Bound:
    """``with Bound(seconds, extra_bytes) as bound: run()``; then ``bound.exceeded`` names the
    limit that stopped the run (None when it finished within both)."""

    TICK = 0.05
    REPEAT = 1.0

    def __init__(self, seconds: float, extra_bytes: int):
        self.seconds, self.extra_bytes = seconds, extra_bytes
        self.exceeded: Optional[str] = None
        self._done = threading.Event()

    def __enter__(self) -> "Bound":
        # interrupt_main does nothing while SIGINT is ignored (a process started in the background
        # by a shell without job control: `cmd &`, nohup): then Python's own handler is put in
        # for the block.
        self._ignored = None
        if threading.current_thread() is threading.main_thread() \
                and signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.SIG_DFL):
            self._ignored = signal.signal(signal.SIGINT, signal.default_int_handler)
        self._start, self._base = time.monotonic(), resident_bytes()
        self._watchdog = threading.Thread(target=self._watch, daemon=True)
        self._watchdog.start()
        return self

    def _watch(self) -> None:
        last = None
        while not self._done.wait(self.TICK):
            if self.exceeded is None:
                if time.monotonic() - self._start > self.seconds:
                    self.exceeded = f"ran past {self.seconds:g} s"
                elif self._base and resident_bytes() - self._base > self.extra_bytes:
                    self.exceeded = f"grew past {self.extra_bytes >> 20} MB"
            if self.exceeded is not None and (last is None or time.monotonic() - last > self.REPEAT):
                last = time.monotonic()
                _thread.interrupt_main()

    def __exit__(self, kind, error, tb) -> bool:
        self._done.set()
        self._watchdog.join()
        try:
            if self.exceeded is None:
                return False
            try:   # an interrupt sent as the block ended is still pending: let it arrive here
                for _ in range(100):
                    time.sleep(0)
            except KeyboardInterrupt:
                pass
            return kind is None or issubclass(kind, KeyboardInterrupt)
        finally:
            if self._ignored is not None:
                signal.signal(signal.SIGINT, self._ignored)
