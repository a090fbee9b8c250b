"""Per-call cost of the frame hook itself, in ns (a benchmark, not a test).

    python -m bench.hook_overhead

Three calls of the same tiny function `f(x, y)`:
  plain            no hook installed
  unwatched        hook installed (some callback set), f's code marked "never watch"
  hit              f watched, one cache entry whose guard is trivially true
"""

from __future__ import annotations

import statistics
import time
import weakref

from minidynamo import _eval_frame as hook


def f(x, y):
    return x


def per_call_ns(n: int = 200_000, repeats: int = 15) -> float:
    """Median over repeats of the time per call of f, loop overhead subtracted."""

    def loop_with_call():
        t = time.perf_counter_ns()
        for _ in range(n):
            f(1, 2)
        return time.perf_counter_ns() - t

    def empty_loop():
        t = time.perf_counter_ns()
        for _ in range(n):
            pass
        return time.perf_counter_ns() - t

    samples = [(loop_with_call() - empty_loop()) / n for _ in range(repeats)]
    return statistics.median(samples)


class _Owner:
    def __call__(self, func, args):
        return None


def always_true(func, x, y):
    return True


def compiled_f(func, x, y):
    return x


def measure() -> dict:
    results = {"plain": per_call_ns()}
    owner = _Owner()
    previous = hook.set_callback(owner)
    try:
        hook.set_cache(f.__code__, "never watched (benchmark)")
        results["unwatched, hook installed"] = per_call_ns()
        hook.set_cache(f.__code__, [(weakref.ref(owner), always_true, compiled_f)])
        results["cache hit, trivial guard"] = per_call_ns()
    finally:
        hook.set_callback(previous)
        hook.set_cache(f.__code__, None)
    return results


def main():
    results = measure()
    plain = results["plain"]
    print(f"{'call':<28}{'ns/call':>10}{'over plain':>12}")
    for name, ns in results.items():
        print(f"{name:<28}{ns:>10.0f}{ns - plain:>12.0f}")


if __name__ == "__main__":
    main()
