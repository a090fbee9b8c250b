"""bench/dynamo_cases.py reads PyTorch's test_functions.py layout; checked here on a tiny file
of the same shape (PyTorch's own file is not part of the repository)."""

import textwrap

from bench.dynamo_cases import load_cases, run_peer, same, totals

CASES_FILE = textwrap.dedent('''
    import collections
    import functools
    import unittest

    import torch
    import a_test_only_package_this_machine_lacks

    def make_test(fn=None, expected_frame_count=1):
        raise AssertionError("replaced by the harness")

    class FunctionTests(a_test_only_package_this_machine_lacks.TestCase):
        @make_test
        def test_add(a, b):
            return a + b

        @make_test
        def test_reduce(a, b):
            return functools.reduce(lambda x, y: x * y, [a, b])

        @make_test
        def test_print_falls_back(a):
            print("side effect")
            return a + 1

        @unittest.skipIf(True, "requires cuda")
        @make_test
        def test_needs_cuda(a):
            return a.cuda()

        @a_test_only_package_this_machine_lacks.parametrize("x", (1, 2))
        def test_not_a_case(self, x):
            pass

        @make_test
        def test_namedtuple_made_per_call(a):
            P = collections.namedtuple("P", ["x"])
            return P(a + 1)
''')


def test_cases_are_read_and_run(tmp_path, capsys):
    path = tmp_path / "test_functions.py"
    path.write_text(CASES_FILE)
    cases, dropped = load_cases(str(path))
    assert sorted(cases) == ["test_add", "test_namedtuple_made_per_call", "test_needs_cuda",
                             "test_print_falls_back", "test_reduce"]
    assert any("a_test_only_package" in d for d in dropped)
    rows = {r["case"]: r for r in run_peer("minidynamo", cases)}
    assert rows["test_needs_cuda"]["status"] == "skipped"
    assert rows["test_add"]["captured"] and rows["test_add"]["equal"]
    assert rows["test_reduce"]["captured"] and rows["test_reduce"]["equal"]
    assert rows["test_namedtuple_made_per_call"]["equal"]
    fell_back = rows["test_print_falls_back"]
    assert fell_back["equal"] and not fell_back["captured"] and "print" in fell_back["reason"]
    assert totals(list(rows.values())) == {"cases": 5, "skipped": 1, "captured_one_graph": 3,
                                           "wrong": 0, "raised": 0}


def test_same_compares_structure_and_values():
    import torch

    t = torch.ones(2)
    assert same((t, [1, "a"], {"k": t}), (t.clone(), [1, "a"], {"k": t.clone()}))
    assert not same([t], (t,))
    assert not same({"k": t}, {"k": t + 1})
