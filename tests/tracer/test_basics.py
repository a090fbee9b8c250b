"""Small functions traced and compared with eager: tensors, Python values, control flow."""

import math
import operator
import sys

import pytest
import torch
import torch.nn.functional as F

from minidynamo.exc import ProgramRaises, Unsupported
from minidynamo.tracer import trace_frame

from .helpers import check, run_traced

x = torch.randn(3, 4)
y = torch.randn(3, 4)
GLOBAL_SCALE = 3.0


def test_arithmetic_and_methods():
    check(lambda a, b: (a + b) * 2 - a / (b.abs() + 1), x, y)
    check(lambda a: a.sum(dim=1, keepdim=True).sigmoid().view(-1), x)
    check(lambda a: -a ** 2 % 3 // 1, x)
    check(lambda a, b: a @ b.t(), x, y)


def test_python_scalars_fold():
    def f(a, n):
        k = n * 2 + 1
        return a * k, k, math.sqrt(16.0), max(n, 3), abs(-n), min([4, 5, n])
    check(f, x, 5)


def test_torch_and_functional():
    def f(a):
        b = torch.cat([a, a.relu()], dim=0)
        c = F.softmax(b, dim=-1) + torch.zeros(6, 4)
        return torch.flatten(F.gelu(c), 1), torch.max(c, dim=1).values
    check(f, x)


def test_shapes_are_constants():
    def f(a):
        n, m = a.shape
        return a.reshape(m, n), a.size(0) * a.size()[1], a.dim(), a.numel(), a.dtype
    check(f, x)


def test_containers_built_indexed_unpacked():
    def f(a, b):
        t = (a, b, 3)
        lst = [a * 2, b]
        lst.append(a + b)
        first, *rest = lst
        d = {"x": a, "y": b}
        d["z"] = first
        return t[0] + rest[-1], d, [v for v in lst[1:]], len(rest), t[::2]
    check(f, x, y)


def test_dict_iteration_and_methods():
    def f(d):
        total = 0
        for k, v in d.items():
            total = total + v * len(k)
        return total, list(d.keys()), d.get("missing", 7)
    check(f, {"a": x, "bb": y})


def test_kwargs_star_args():
    def g(a, *rest, scale=1.0, **extra):
        return a * scale + sum(rest) + extra.get("bias", 0)

    def f(a, b):
        args = (b, b)
        kw = {"bias": 2}
        return g(a, *args, scale=3.0, **kw), g(a)
    check(f, x, y)


def test_closures_and_nested_functions():
    def f(a):
        factor = 2

        def inner(b):
            return b * factor

        add = lambda c, k=1: c + k  # noqa: E731
        return inner(add(a)), [inner(v) for v in (a, a)]
    check(f, x)


def test_global_and_closure_reads():
    scale = 4

    def f(a):
        return a * GLOBAL_SCALE * scale
    check(f, x)


def test_control_flow_on_python_values():
    def f(a, flag, n):
        if flag:
            a = a + 1
        else:
            a = a - 1
        i = 0
        while i < n:
            a = a * 2
            i += 1
        for j in range(n):
            a = a + j
        for j, v in enumerate([1, 2]):
            a = a + j * v
        for p, q in zip([1, 2], [3, 4]):
            a = a + p * q
        return a if a is not None else None
    check(f, x, True, 3)
    check(f, x, False, 0)


def test_isinstance_getattr_hasattr():
    def f(a, opt):
        out = a
        if isinstance(a, torch.Tensor) and opt is None:
            out = out + 1
        if hasattr(a, "shape"):
            out = out * getattr(a, "ndim")
        return out
    check(f, x, None)


def test_fstring_and_assert_on_constants():
    def f(a, n):
        assert n > 0, f"n must be positive, got {n}"
        name = f"layer{n}"
        return a + len(name)
    check(f, x, 2)


def test_in_place_on_inputs_replayed():
    def f(a, b):
        a.add_(1)
        b[0] = 5.0
        a += b
        return a
    check(f, x.clone(), y.clone())


def test_comparison_mask():
    def f(a):
        mask = a > 0
        return a.masked_fill(mask, -1e9), (a == 0).sum()
    check(f, x)


def test_operator_module_and_math():
    def f(a):
        return operator.add(a, 1), math.floor(2.5), math.pi * a
    check(f, x)


def test_recursion_depth_limit():
    def rec(a, n):
        return rec(a, n - 1) + 1 if n > 0 else a

    def f(a):
        return rec(a, 5)
    check(f, x)

    def forever(a):
        return forever(a)
    with pytest.raises(Unsupported, match="inline_depth_limit"):
        run_traced(forever, x)


def test_with_no_grad_block():
    w = torch.randn(3, requires_grad=True)

    def f(a):
        with torch.no_grad():
            b = a * 2
            with torch.enable_grad():
                c = a * 3
        return b, c, a * 4
    capture, (b, c, d) = run_traced(f, w)
    assert not b.requires_grad and c.requires_grad and d.requires_grad
    assert torch.is_grad_enabled()


def test_try_finally_sets_and_map():
    def tries(a):
        try:
            return a + 1
        finally:
            pass
    check(tries, x)

    def f(a, ns):
        s = {n % 3 for n in ns}
        return list(map(torch.neg, [a, a + 1])), len(s), operator.itemgetter(1)((a, a * 2))
    check(f, x, [1, 2, 4])


@pytest.mark.parametrize("fn, word", [
    (lambda a: a.item(), "item"),
    (lambda a: a + 1 if a.sum() > 0 else a, "data-dependent"),
    (lambda a: print(a), "print"),
    (lambda a: a.tolist(), "tolist"),
])
def test_unsupported_reasons(fn, word):
    with pytest.raises(Unsupported, match=word):
        run_traced(fn, x)


def test_raise_falls_back():
    """A raise no handler of the frame catches ends the trace with the very exception (the frame
    runs eagerly on that path, where Python raises it)."""
    def raises(a):
        raise ValueError("no")
    with pytest.raises(ProgramRaises, match="ValueError raised") as caught:
        run_traced(raises, x)
    assert type(caught.value.exception) is ValueError and caught.value.exception.args == ("no",)


def test_mutations_of_caller_objects_are_replayed():
    def mutates(a, lst, d):
        lst.append(a * 2)
        lst[0] = lst[0] + 1
        d["new"] = a
        return len(lst)
    check(mutates, x, [y, 3], {"k": 1})


def test_a_mutated_list_passed_twice_is_one_tracker_guarded_as_one():
    def two_lists(a, p, q):
        p.append(a)
        return len(q)                  # sees the append made through the other name
    shared = []
    capture = check(two_lists, x, shared, shared)
    assert any("L['q'] is L['p']" in str(guard) or "L['p'] is L['q']" in str(guard) for guard in capture.guards)


counter = 0


def test_global_and_module_attribute_stores_are_replayed():
    class Counting(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, a):
            global counter
            counter = counter + 1
            self.calls = self.calls + 1
            self.last = a * 2
            return a + self.calls

    m = Counting()
    capture, out = run_traced(m, x)
    assert capture.build_output.needs_frame
    assert m.calls == 1 and counter == 1 and torch.equal(m.last, x * 2)
    torch.testing.assert_close(out, x + 1)


def test_tracing_leaves_user_data_alone_and_no_dynamo():
    a = x.clone()
    capture = trace_frame(lambda t: t.add_(1), (a,))
    assert torch.equal(a, x)                      # tracing did not run the in-place op
    if "torchvision" not in sys.modules and "timm" not in sys.modules:   # those import it themselves
        assert not any(name.startswith("torch._dynamo") for name in sys.modules)
    capture.graph_module(*capture.example_inputs)
    assert torch.equal(a, x + 1)                  # running the graph does


@torch.no_grad()
def module_level_no_grad(t):
    return t * 2


def test_no_grad_decorators():
    w = torch.randn(3, requires_grad=True)

    def f(a):
        @torch.no_grad()
        def doubled(t):
            return t * 2
        return doubled(a), module_level_no_grad(a), a * 3

    _, (b, c, d) = run_traced(f, w)
    assert not b.requires_grad and not c.requires_grad and d.requires_grad


def test_local_import_of_a_loaded_module():
    def f(a):
        import math as m
        from torch.nn import functional as fn
        return fn.relu(a) * m.pi
    check(f, x)


def test_disabled_functions_are_not_inlined():
    import minidynamo

    @minidynamo.disable
    def helper(t):
        return t + 1

    with pytest.raises(Unsupported, match="helper"):
        run_traced(lambda a: helper(a) * 2, x)


def test_returning_the_callers_list_returns_that_very_object():
    def f(a, lst):
        lst.append(a + 1)
        return lst, {"same": lst}

    lst = [x]
    capture, (out, d) = run_traced(f, x, lst)
    assert out is lst and d["same"] is lst and len(lst) == 2
    torch.testing.assert_close(lst[1], x + 1)


@pytest.mark.parametrize("make", [lambda: torch.randperm(5).float(), lambda: torch.tril_indices(3, 3).float(),
                                  lambda: torch.empty_strided((5,), (1,)).fill_(2.0), lambda: torch.rand(5)])
def test_factories_make_meta_examples_and_leave_the_random_state_alone(make):
    """Every factory (one set, ``meta.FACTORIES``) is traced with a meta example: tracing runs
    nothing real, so a seeded program draws the same numbers compiled as eagerly."""
    import minidynamo

    def f(a):
        return a.sum() + make()

    minidynamo.reset()
    opt = minidynamo.optimize("eager", nopython=True)(f)
    torch.manual_seed(0)
    got = opt(torch.ones(5))
    torch.manual_seed(0)
    torch.testing.assert_close(got, f(torch.ones(5)))
    assert minidynamo.counters["compiles"] == 1
    minidynamo.reset()
