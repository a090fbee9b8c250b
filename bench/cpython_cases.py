"""CPython's own test suite, run through minidynamo: Python semantics on programs nobody here wrote.

    python -m bench.cpython_cases [--modules test_set,test_dict,...] [--timeout S] [--json OUT]

Every test method of each module (``Lib/test/<module>.py`` of the running interpreter: its
language and builtin-type tests) is run twice, each run in its own process: plainly, and as a
frame optimized by ``minidynamo.optimize("eager")`` (``unittest.TestCase._callTestMethod``
calls the method through it, so the method's frame and every frame it calls are seen by the
hook: traced, broken into pieces, or run eagerly).  A test whose outcome differs (passed
plainly, failed or raised under minidynamo) is a finding: a wrong answer, a crash, or a
difference a program can observe (an object's lifetime, a frame's name).  Doctest-based
modules run as one test each and are not wrapped.

Per module: tests, how many differ, the hook's frames / compiles / fallbacks / graph breaks,
seconds each way; then every differing test with the last line of its error.  Exit status 1
when some outcome differs or a run crashed.  Minutes on two cores for the default list.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

# Lib/test modules about the language and the builtin types (those of Dynamo's own CPython
# test corpus, and their neighbours).
MODULES = (
    "test_augassign test_baseexception test_bisect test_bool test_builtin test_class test_collections "
    "test_compare test_complex test_contextlib test_copy test_dataclasses test_defaultdict test_deque "
    "test_descr test_dict test_dictviews test_enum test_exception_variations test_exceptions test_float "
    "test_fractions test_fstring test_funcattrs test_functools test_generator_stop test_generators "
    "test_grammar test_heapq test_int test_iter test_itertools test_keywordonlyarg test_list test_long "
    "test_math test_named_expressions test_opcodes test_operator test_ordered_dict test_patma "
    "test_property test_raise test_range test_richcmp test_scope test_set test_setcomps test_slice "
    "test_sort test_string test_super test_tuple test_userdict test_userlist test_with").split()

_CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_WORKER = r'''
import importlib, json, signal, sys, unittest
mode, module, out, per_test = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
import torch
if mode == "minidynamo":
    import minidynamo
    plain_call = unittest.TestCase._callTestMethod
    def call_optimized(self, method):
        fn = getattr(method, "__func__", None)
        if fn is None:
            return plain_call(self, method)
        if minidynamo.optimize("eager")(fn)(self) is not None:   # as unittest's own does
            import warnings
            warnings.warn(f"It is deprecated to return a value that is not None from a "
                          f"test case ({method})", DeprecationWarning, stacklevel=3)
    unittest.TestCase._callTestMethod = call_optimized
results = {}
class Result(unittest.TestResult):
    def startTest(self, test):
        super().startTest(test)
        signal.alarm(per_test)
    def stopTest(self, test):
        signal.alarm(0)
        results.setdefault(test.id(), ["ok", ""])
        super().stopTest(test)
    def _error(self, kind, test, err):
        text = self._exc_info_to_string(err, test).strip().splitlines()
        results[test.id()] = [kind, text[-1] if text else ""]
    def addError(self, test, err): self._error("error", test, err)
    def addFailure(self, test, err): self._error("fail", test, err)
    def addSkip(self, test, reason): results[test.id()] = ["skip", reason]
    def addExpectedFailure(self, test, err): results[test.id()] = ["xfail", ""]
    def addUnexpectedSuccess(self, test): results[test.id()] = ["xpass", ""]
def too_long(*_):
    raise TimeoutError(f"over {per_test} s")
signal.signal(signal.SIGALRM, too_long)
def tests_of(suite):
    for test in suite:
        if isinstance(test, unittest.TestSuite):
            yield from tests_of(test)
        else:
            yield test
suite = unittest.TestLoader().loadTestsFromModule(importlib.import_module("test." + module))
result = Result()
for test in tests_of(suite):
    test.run(result)
counters = {}
if mode == "minidynamo":
    c = minidynamo.counters
    counters = {"frames": c["frames_seen"], "compiles": c["compiles"], "fallbacks": len(c["fallback_reasons"]),
                "breaks": len(c["break_reasons"])}
json.dump({"results": results, "counters": counters}, open(out, "w"))
'''


def run_module(module: str, mode: str, timeout: float, per_test: int, scratch: str) -> dict:
    """One module in a fresh process: {"results": {test id: [outcome, last error line]}, ...},
    or {"crashed": why} when the process died or ran out of time."""
    out = os.path.join(scratch, f"{mode}_{module}.json")
    # The tests write their files (os_helper.TESTFN) into the working directory: a scratch one,
    # with this checkout on the path for minidynamo.
    cwd = os.path.join(scratch, f"cwd_{mode}_{module}")
    os.makedirs(cwd, exist_ok=True)
    path = os.pathsep.join(filter(None, [_CHECKOUT, os.environ.get("PYTHONPATH")]))
    start = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-c", _WORKER, mode, module, out, str(per_test)],
                              capture_output=True, text=True, timeout=timeout, cwd=cwd,
                              env={**os.environ, "PJRT_DEVICE": os.environ.get("PJRT_DEVICE", "CPU"),
                                   "PYTHONPATH": path})
    except subprocess.TimeoutExpired:
        return {"crashed": f"timed out after {timeout:.0f} s", "seconds": timeout}
    seconds = time.perf_counter() - start
    if proc.returncode != 0 or not os.path.exists(out):
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [""]
        return {"crashed": f"exit status {proc.returncode}: {tail[0][:200]}", "seconds": seconds}
    with open(out) as f:
        report = json.load(f)
    report["seconds"] = seconds
    return report


def differences(plain: dict, optimized: dict) -> list:
    """(test id, plain outcome, minidynamo outcome, its last error line) per differing test."""
    rows = []
    for test, (outcome, message) in optimized["results"].items():
        expected = plain["results"].get(test, ["missing", ""])[0]
        if outcome != expected:
            rows.append((test, expected, outcome, message))
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", default=",".join(MODULES), help="comma-separated Lib/test module names")
    parser.add_argument("--timeout", type=float, default=1200, help="seconds per module and mode")
    parser.add_argument("--per-test", type=int, default=120, help="seconds per test method")
    parser.add_argument("--json", help="write every module's report here")
    args = parser.parse_args(argv)
    scratch = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"cpython_cases_{os.getpid()}")
    os.makedirs(scratch, exist_ok=True)
    print(f"{'module':24s} {'tests':>6s} {'differ':>6s} {'frames':>7s} {'compiles':>8s} {'fallbacks':>9s} "
          f"{'breaks':>7s} {'plain s':>8s} {'ours s':>7s}")
    found, crashed, reports, total = [], [], {}, 0
    for module in args.modules.split(","):
        plain = run_module(module, "plain", args.timeout, args.per_test, scratch)
        ours = run_module(module, "minidynamo", args.timeout, args.per_test, scratch)
        reports[module] = {"plain": plain, "minidynamo": ours}
        if "crashed" in plain or "crashed" in ours:
            crashed.append((module, plain.get("crashed", "ok"), ours.get("crashed", "ok")))
            print(f"{module:24s} crashed: plain {plain.get('crashed', 'ok')}; minidynamo {ours.get('crashed', 'ok')}")
            continue
        rows = differences(plain, ours)
        found += [(module, *row) for row in rows]
        total += len(ours["results"])
        c = ours["counters"]
        print(f"{module:24s} {len(ours['results']):6d} {len(rows):6d} {c['frames']:7d} {c['compiles']:8d} "
              f"{c['fallbacks']:9d} {c['breaks']:7d} {plain['seconds']:8.1f} {ours['seconds']:7.1f}")
    print(f"\n{total} tests in {len(args.modules.split(','))} modules: {len(found)} differ, {len(crashed)} modules crashed")
    for module, test, expected, outcome, message in found:
        print(f"  {test}: {expected} -> {outcome}: {message[:160]}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(reports, f, indent=1)
    return 1 if found or crashed else 0


if __name__ == "__main__":
    sys.exit(main())
