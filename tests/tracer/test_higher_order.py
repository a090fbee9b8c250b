"""``torch.vmap`` traced into a body sub-graph, ``with <TorchFunctionMode>:`` blocks inlined at
every torch call, pytree over traced containers and ``autograd.Function.apply`` as one node:
each compared with eager on two calls, with one graph, no fallback and no recompile."""

import pytest
import torch
import torch.utils._pytree as pytree
from torch.overrides import TorchFunctionMode

import minidynamo
from minidynamo.eval_frame import OptimizeContext
from minidynamo.explain import ExplainOutput
from minidynamo.tracer.variables.autograd_function import apply_of

from .helpers import assert_same, compiled_twice


def vmap_nodes(report, kinds=("vmap_call", "run_flat")):
    """The graphs' vmap nodes: the runtime ``vmap_call`` and the flattened ``run_flat``."""
    return [n for gm in report.graphs for n in gm.graph.nodes if getattr(n.target, "__name__", "") in kinds]


# ---------------------------------------------------------------- torch.vmap

def test_vmap_of_a_lambda():
    def f(x):
        return torch.vmap(lambda row: row * 2 + row.sum())(x)

    report = compiled_twice(f, lambda: (torch.randn(3, 4),))
    assert len(vmap_nodes(report)) == 1
    assert "vmap_flat_0" in report.graph_codes[0]


def test_nested_vmap_with_in_dims_tuples_and_none():
    def f(x, y, z):
        inner = torch.vmap(lambda a, b, c: a * b - c, in_dims=(0, None, None))
        outer = torch.vmap(inner, in_dims=(None, 0, None), out_dims=1)
        return outer(x, y, z)

    compiled_twice(f, lambda: (torch.randn(3), torch.randn(5, 3), torch.randn(3)))


def test_vmap_of_a_closure_reading_an_outer_tensor_and_an_input():
    def make_mask(bias):
        def inner(i, j):
            return (j <= i) & (bias > 0)         # bias: a tensor of the outer graph (lifted)
        return inner

    def f(table, scale, n: int):
        fn = torch.vmap(torch.vmap(make_mask(table.sum(1)), in_dims=(None, 0)), in_dims=(0, None))
        idx = torch.arange(n)
        return fn(idx, idx).float() * scale

    compiled_twice(f, lambda: (torch.randn(4, 4), torch.randn(()), 4))


def test_vmap_returning_a_tuple_and_reading_a_graph_input_inside():
    def f(x, w):
        return torch.vmap(lambda row: (row @ w, row.max()))(x)

    compiled_twice(f, lambda: (torch.randn(3, 4), torch.randn(4, 2)))


def test_vmap_body_with_a_side_effect_falls_back_cleanly():
    seen = []

    def f(x):
        def body(row):
            seen.append(1)                 # a side effect on an object outside the body
            return row * 2
        return torch.vmap(body)(x) + 1

    # equal to eager on both calls; the body is not captured (a fallback or a break around it)
    report = compiled_twice(f, lambda: (torch.randn(3, 4),), graphs=None, fallbacks=None)
    assert any("side effects" in r for r in report.reasons), report.reasons
    assert not vmap_nodes(report)


def test_vmap_body_drawing_random_numbers_is_refused():
    def f(x):
        return torch.vmap(lambda row: row + torch.rand(()), randomness="different")(x)

    report = compiled_twice_unchecked(f, torch.randn(3, 4))
    assert any("randomness" in r for r in report.reasons), report.reasons     # a break or a fallback
    assert not vmap_nodes(report)


def test_vmap_body_writing_a_lifted_input_is_refused():
    def f(x, acc):
        def body(row):
            acc.add_(1)                   # in place on a tensor from outside the body
            return row * acc
        return torch.vmap(body)(x)

    x, acc = torch.randn(3, 4), torch.zeros(4)
    report = compiled_twice_unchecked(f, x, acc)
    assert report.fallback_count >= 1 and any("in place" in r for r in report.reasons), report.reasons


def compiled_twice_unchecked(fn, *args):
    minidynamo.reset()
    report = ExplainOutput()
    try:
        OptimizeContext("eager", recorder=report)(fn)(*args)
    except Exception:
        pass                               # eager itself may refuse what the trace refused
    minidynamo.reset()
    return report


# ---------------------------------------------------------------- TorchFunctionModes

class AddIsSub(TorchFunctionMode):
    """Rewrites every addition into a subtraction."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in (torch.add, torch.Tensor.add):
            func = torch.sub if func is torch.add else torch.Tensor.sub
        return func(*args, **(kwargs or {}))


GLOBAL_MODE = AddIsSub()


def test_mode_made_in_the_frame_rewrites_add_to_sub():
    def f(a, b):
        with AddIsSub():
            c = torch.add(a, b) + a          # torch.add and the + operator (Tensor.add)
        return c, a.add(b)                   # outside the block: a real add

    a, b = torch.randn(3), torch.randn(3)
    compiled_twice(f, lambda: (a, b))
    out = OptimizeContext("eager")(f)(a, b)
    assert_same(out[0], a - b - a)
    minidynamo.reset()


def test_mode_read_from_a_global():
    def f(a, b):
        with GLOBAL_MODE:
            return a.add(b) * 2

    compiled_twice(f, lambda: (torch.randn(3), torch.randn(3)))


class ShapeCounter(TorchFunctionMode):
    """Sees attribute reads (``Tensor.shape.__get__``) and indexing, as torch passes them."""

    def __init__(self):
        super().__init__()
        self.scale = 3.0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if func is torch.Tensor.__getitem__:
            return result * self.scale
        return result


def test_mode_sees_indexing_and_reads_its_own_attributes():
    def f(a):
        with ShapeCounter():
            return a[0] + a.shape[0]

    compiled_twice(f, lambda: (torch.randn(3, 2),))


class IndexThroughFunction(TorchFunctionMode):
    """Like flex attention's TransformGetItemToIndex: ``t[i, j]`` with tensor indices becomes an
    autograd.Function over the index list (found with pytree)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func == torch.Tensor.__getitem__:
            leaves = pytree.tree_leaves(args[1])
            if all(isinstance(x, torch.Tensor) for x in leaves):
                return GatherIndex.apply(args[0], leaves)
        return func(*args, **(kwargs or {}))


class GatherIndex(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x, indices):
        return torch.ops.aten.index(x, indices)

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, grad):
        return None, None


def test_vmap_inside_a_mode_block_uses_the_mode_in_the_body():
    def f(table, n: int):
        def pick(i, j):
            return table[i, j]             # 0-d tensor indices: eager vmap would call .item()
        idx = torch.arange(n)
        with IndexThroughFunction():
            return torch.vmap(torch.vmap(pick, in_dims=(None, 0)), in_dims=(0, None))(idx, idx)

    report = compiled_twice(f, lambda: (torch.randn(4, 4), 4))
    assert "aten.index" in report.graph_codes[0] and len(vmap_nodes(report, ("run_flat",))) == 1


def test_pytree_over_traced_containers():
    def f(a, b):
        leaves = pytree.tree_leaves({"x": (a, [b, None]), "y": a})
        doubled = pytree.tree_map(lambda t: t * 2, (a, {"k": b}))
        flat, spec = pytree.tree_flatten([a, (b,)])
        back = pytree.tree_unflatten([t + 1 for t in flat], spec)
        return leaves, doubled, back              # (None is a leaf too)

    compiled_twice(f, lambda: (torch.randn(2), torch.randn(2)))


# ---------------------------------------------------------------- autograd.Function.apply

class ScaledSquare(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        ctx.scale = scale
        return x * x * scale

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 2 * x * ctx.scale, None


def test_autograd_function_apply_is_one_node_with_its_backward():
    def f(x):
        return ScaledSquare.apply(x.sin(), 3.0).sum()

    report = compiled_twice(f, lambda: (torch.randn(4),))
    targets = [n.target for n in report.graphs[0].graph.nodes if n.op == "call_function"]
    assert apply_of(ScaledSquare) in targets          # a target fx can name (the graph runs: no re-run)
    x = torch.randn(4, requires_grad=True)
    compiled = OptimizeContext("eager")(f)
    compiled(x).backward()
    expected = torch.autograd.grad(f(x), x)[0]
    torch.testing.assert_close(x.grad, expected)
    minidynamo.reset()


class RefusesWhenArmed(torch.autograd.Function):
    runs = []
    armed = [False]

    @staticmethod
    def forward(ctx, x):
        RefusesWhenArmed.runs.append("forward")
        if RefusesWhenArmed.armed[0]:
            RefusesWhenArmed.armed[0] = False
            raise RuntimeError("forward refused")
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


def test_a_forward_that_raises_at_run_time_runs_once_and_its_error_goes_out():
    """The node runs the Function's own Python: when it raises, the frame is not run again (that
    would run ``forward`` twice, and a forward that refuses once would not raise at all)."""
    def f(x):
        return RefusesWhenArmed.apply(x).sin()

    def failing_call(fn):
        fn(torch.ones(3))
        fn(torch.ones(3))
        RefusesWhenArmed.runs.clear()
        RefusesWhenArmed.armed[0] = True
        with pytest.raises(RuntimeError, match="forward refused"):
            fn(torch.ones(3))
        return len(RefusesWhenArmed.runs)

    assert failing_call(f) == 1
    assert failing_call(OptimizeContext("eager")(f)) == 1
    minidynamo.reset()


SPLIT_CONFIG = {"two": False, "rows": 3}


class SplitByConfig(torch.autograd.Function):
    """Which outputs exist, and their shapes, follow the program's state."""

    @staticmethod
    def forward(ctx, x):
        rows = SPLIT_CONFIG["rows"]
        if SPLIT_CONFIG["two"]:
            return x[:rows] * 2, x[:rows] * 3
        return x[:rows] * 2, None

    @staticmethod
    def backward(ctx, grad_a, grad_b):
        return None


def test_what_a_programs_forward_reads_is_guarded():
    """``forward`` is traced on the side for its guards: the results' structure and shapes the
    node's meta run gave hold while what it read holds, and a change recompiles."""
    def f(x):
        a, b = SplitByConfig.apply(x)
        return a.sum() * a.shape[0] + (0 if b is None else b.sum()), b is None

    compiled = OptimizeContext("eager")(f)
    try:
        for two, rows in [(False, 3), (False, 3), (True, 3), (True, 2), (False, 2)]:
            SPLIT_CONFIG.update(two=two, rows=rows)
            x = torch.ones(5)
            assert_same(compiled(x), f(x))
    finally:
        SPLIT_CONFIG.update(two=False, rows=3)
    minidynamo.reset()


class CountsItsRuns(torch.autograd.Function):
    runs = []

    @staticmethod
    def forward(ctx, x):
        CountsItsRuns.runs.append(1)
        return x * len(CountsItsRuns.runs)

    @staticmethod
    def backward(ctx, grad):
        return grad


def test_a_forward_with_python_side_effects_runs_once_per_call():
    """The node's meta run would run it once more on the compiling call: such a forward is not
    one node (the call runs eagerly at a graph break)."""
    def f(x):
        return CountsItsRuns.apply(x) + 1

    compiled = OptimizeContext("eager")(f)
    for _ in range(3):
        CountsItsRuns.runs.clear()
        expected = f(torch.ones(3))
        CountsItsRuns.runs.clear()
        assert_same(compiled(torch.ones(3)), expected)
        assert CountsItsRuns.runs == [1]
    minidynamo.reset()


def test_autograd_function_inside_a_mode_block_is_refused():
    def f(x):
        with AddIsSub():
            return ScaledSquare.apply(x, 2.0)

    report = compiled_twice_unchecked(f, torch.randn(3))
    assert report.fallback_count >= 1 and any("TorchFunctionMode" in r for r in report.reasons), report.reasons


def test_vmap_body_writing_its_argument_through_a_view_is_refused():
    def f(x):
        def body(row):
            row[0].mul_(2)                # writes the caller's x through a per-sample view
            return row + 1
        return torch.vmap(body)(x)

    x = torch.randn(3, 4)
    expected_x = x.clone()
    expected = f(expected_x)
    report = ExplainOutput()
    minidynamo.reset()
    got = OptimizeContext("eager", recorder=report)(f)(x)
    assert_same(got, expected)
    assert_same(x, expected_x)
    assert any("in place" in r for r in report.reasons), report.reasons
    minidynamo.reset()


BIAS = torch.randn(4)


def test_a_global_tensor_first_read_inside_a_body_is_a_root_input():
    def f(x):
        return torch.vmap(lambda row: row - BIAS)(x)    # BIAS: wrapped while the body is traced

    report = compiled_twice(f, lambda: (torch.randn(3, 4),))
    placeholders = [n.name for n in report.graphs[0].graph.nodes if n.op == "placeholder"]
    assert any("bias" in name for name in placeholders), placeholders


def test_mode_sees_reflected_operators_as_torch_passes_them():
    class Negates(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            result = func(*args, **(kwargs or {}))
            return -result if func is torch.Tensor.__rsub__ else result

    def f(a):
        with Negates():
            return 2 - a, a - 2

    compiled_twice(f, lambda: (torch.randn(3),))


class DoublesAttention(TorchFunctionMode):
    """Rewrites the result of one public Python torch function, which torch's own code passes
    to the mode through ``handle_torch_function`` (``has_torch_function`` is True in a block)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if func is torch.nn.functional.multi_head_attention_forward:
            return result[0] * 2, result[1]
        return result


def test_library_code_sees_has_torch_function_true_inside_a_mode_block():
    attention = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval()

    def f(x):
        with DoublesAttention():
            return attention(x, x, x, need_weights=False)[0]   # no fast path under a mode

    with torch.no_grad():
        compiled_twice(f, lambda: (torch.randn(2, 3, 8),))
