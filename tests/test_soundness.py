"""Guards are sound: change one thing after the first call, and the next call equals eager and
recompiles exactly when it must (and a weight updated in place is seen without a recompile).

Every test runs through ``minidynamo.optimize(backend)`` with a backend that counts the graphs
it is given; eager PyTorch is the oracle.
"""

import pytest
import torch

import minidynamo


class CountingBackend:
    """Runs graphs eagerly and counts how many it compiled."""

    def __init__(self):
        self.compiles = 0

    def __call__(self, gm, example_inputs):
        self.compiles += 1
        return gm.forward


@pytest.fixture(autouse=True)
def fresh_caches():
    minidynamo.reset()
    yield
    minidynamo.reset()


class Checker:
    """``check(args, recompiles=...)``: optimized == eager, and compiles grew by that much."""

    def __init__(self, fn):
        self.fn = fn
        self.backend = CountingBackend()
        self.optimized = minidynamo.optimize(self.backend)(fn)

    def check(self, *args, compiled: int):
        expected = self.fn(*args)
        got = self.optimized(*args)
        assert_same(got, expected)
        # entries made for the frame (a graph without tensor ops never reaches the backend)
        made = [e for e in minidynamo.cache_entries(self.fn) if e.compiled_fn is not None]
        assert len(made) == compiled, minidynamo.counters["recompile_reasons"]
        assert minidynamo.counters["fallbacks"] == 0, minidynamo.counters["fallback_reasons"]


def assert_same(got, expected):
    if isinstance(expected, torch.Tensor):
        assert type(got) is type(expected)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        torch.testing.assert_close(got, expected)
    else:
        assert got == expected


def last_recompile_reason() -> str:
    return minidynamo.counters["recompile_reasons"][-1]


# ----------------------------------------------------------------------------- tensors


def scale_and_shift(x):
    return x * 2 + 1


def test_tensor_dtype_change_recompiles():
    c = Checker(scale_and_shift)
    x = torch.randn(3, 4)
    c.check(x, compiled=1)
    c.check(torch.randn(3, 4), compiled=1)          # new data: a hit
    c.check(x.double(), compiled=2)
    assert "L['x'].dtype: expected torch.float32, got torch.float64" in last_recompile_reason()
    c.check(x, compiled=2)                          # back to float32: the first entry again


def test_tensor_shape_change_recompiles():
    c = Checker(lambda x: x.sum(0) * x.shape[0])
    c.check(torch.randn(3, 4), compiled=1)
    c.check(torch.randn(5, 4), compiled=2)
    assert "L['x'].shape: expected [3, 4], got [5, 4]" in last_recompile_reason()


def test_transposed_tensor_recompiles():
    c = Checker(lambda x: x.view(-1) if x.is_contiguous() else x.reshape(-1) + 1)
    x = torch.randn(4, 4)
    c.check(x, compiled=1)
    c.check(x.t(), compiled=2)
    assert "stride" in last_recompile_reason()


def test_requires_grad_change_recompiles():
    c = Checker(lambda x: (x * 3).requires_grad)
    x = torch.randn(3)
    c.check(x, compiled=1)
    c.check(x.clone().requires_grad_(), compiled=2)
    assert "requires_grad" in last_recompile_reason()


def test_none_versus_tensor():
    def linear(x, bias):
        return x * 2 if bias is None else x * 2 + bias

    c = Checker(linear)
    x = torch.randn(3)
    c.check(x, None, compiled=1)
    c.check(x, torch.ones(3), compiled=2)
    c.check(x, None, compiled=2)


# ----------------------------------------------------------------------------- constants


def test_int_argument_change_recompiles():
    c = Checker(lambda x, n: x * n)
    x = torch.randn(3)
    c.check(x, 2, compiled=1)
    c.check(x, 2, compiled=1)
    c.check(x, 3, compiled=2)
    assert "L['n']: expected 2, got 3" in last_recompile_reason()
    c.check(x, 2.0, compiled=3)                     # same value, another type


def test_bool_argument_change_recompiles():
    c = Checker(lambda x, flag: x.relu() if flag else x.neg())
    x = torch.randn(5)
    c.check(x, True, compiled=1)
    c.check(x, False, compiled=2)
    c.check(x, True, compiled=2)


SCALE = 2.0


def uses_global_constant(x):
    return x * SCALE


def test_rebinding_a_global_constant_recompiles(monkeypatch):
    c = Checker(uses_global_constant)
    x = torch.randn(3)
    c.check(x, compiled=1)
    monkeypatch.setitem(globals(), "SCALE", 3.0)
    c.check(x, compiled=2)
    assert "G['SCALE']: expected 2.0, got 3.0" in last_recompile_reason()


def activation(t):
    return t.relu()


def uses_global_function(x):
    return activation(x) + 1


def test_rebinding_a_global_function_recompiles(monkeypatch):
    c = Checker(uses_global_function)
    x = torch.randn(6)
    c.check(x, compiled=1)
    monkeypatch.setitem(globals(), "activation", lambda t: t.sigmoid())
    c.check(x, compiled=2)
    assert "G['activation']" in last_recompile_reason()


def test_changing_a_closure_cell_recompiles():
    factor = 2.0

    def scaled(x):
        return x * factor

    c = Checker(scaled)
    x = torch.randn(3)
    c.check(x, compiled=1)
    factor = 5.0  # noqa: F841  (the cell changes: scaled sees it)
    c.check(x, compiled=2)
    assert "C['factor']: expected 2.0, got 5.0" in last_recompile_reason()


# ----------------------------------------------------------------------------- containers, objects


def test_list_length_change_recompiles():
    c = Checker(lambda xs: sum(xs[1:], xs[0]))
    xs = [torch.randn(2) for _ in range(3)]
    c.check(xs, compiled=1)
    c.check([torch.randn(2) for _ in range(3)], compiled=1)
    c.check(xs[:2], compiled=2)
    assert "len(L['xs']): expected 3, got 2" in last_recompile_reason()


def test_dict_keys_change_recompiles():
    def weighted(d):
        total = 0
        for i, key in enumerate(d):
            total = total + d[key] * (i + 1)
        return total

    c = Checker(weighted)
    t = torch.randn(3)
    c.check({"a": t, "b": t}, compiled=1)
    c.check({"a": t * 2, "b": t}, compiled=1)
    c.check({"b": t, "a": t * 2}, compiled=2)       # same keys, another order
    c.check({"a": t, "b": t, "c": t}, compiled=3)


class Config:
    def __init__(self, alpha, use_tanh):
        self.alpha = alpha
        self.use_tanh = use_tanh


def test_object_attribute_change_recompiles():
    config = Config(alpha=0.5, use_tanh=False)

    def blend(x, cfg):
        y = x.tanh() if cfg.use_tanh else x
        return y * cfg.alpha

    c = Checker(blend)
    x = torch.randn(4)
    c.check(x, config, compiled=1)
    config.alpha = 0.25
    c.check(x, config, compiled=2)
    assert "L['cfg'].alpha: expected 0.5, got 0.25" in last_recompile_reason()
    config.use_tanh = True
    c.check(x, config, compiled=3)


# ----------------------------------------------------------------------------- modules


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)
        self.act = torch.nn.ReLU()
        self.scale = 2.0

    def forward(self, x):
        y = self.act(self.linear(x)) * self.scale
        return y if self.training else y - 1


def module_checker(module):
    """Optimize the module; the eager oracle is the same module, called plainly."""
    c = Checker(module)
    c.module = module
    return c


def test_eval_and_train_recompile_once_each():
    block = Block()
    c = module_checker(block)
    x = torch.randn(2, 4)
    c.check(x, compiled=1)
    block.eval()
    c.check(x, compiled=2)
    assert "L['self'].training: expected True, got False" in last_recompile_reason()
    block.train()
    c.check(x, compiled=2)


def test_replacing_a_submodule_recompiles():
    block = Block()
    c = module_checker(block)
    x = torch.randn(2, 4)
    c.check(x, compiled=1)
    replaced = block.act              # kept alive: an entry dies with what it pinned (test_identity_pins.py)
    block.act = torch.nn.Tanh()
    c.check(x, compiled=2)
    assert "L['self'].act" in last_recompile_reason() and replaced is not block.act


def test_changing_a_module_float_attribute_recompiles():
    block = Block()
    c = module_checker(block)
    x = torch.randn(2, 4)
    c.check(x, compiled=1)
    block.scale = 0.5
    c.check(x, compiled=2)
    assert "L['self'].scale: expected 2.0, got 0.5" in last_recompile_reason()


def test_weight_updated_in_place_is_seen_without_recompiling():
    block = Block()
    c = module_checker(block)
    x = torch.randn(2, 4)
    c.check(x, compiled=1)
    with torch.no_grad():
        block.linear.weight.mul_(-3.0)
        block.linear.bias.add_(1.0)
    c.check(x, compiled=1)


def test_replacing_a_weight_with_another_shape_recompiles():
    block = Block()
    c = module_checker(block)
    x = torch.randn(2, 4)
    c.check(x, compiled=1)
    replaced = block.linear                          # kept alive: an entry dies with what it pinned
    block.linear = torch.nn.Linear(4, 4)            # a new, equal-shaped module: new identity
    c.check(x, compiled=2)
    assert replaced is not block.linear
    with torch.no_grad():
        block.linear.weight.data = torch.randn(4, 4).t()   # same shape, transposed strides
    c.check(x, compiled=3)


def test_a_forward_hook_added_later_is_run():
    block = Block()
    c = module_checker(block)
    x = torch.randn(2, 4)
    c.check(x, compiled=1)
    handle = block.register_forward_hook(lambda module, args, out: out * 10)
    try:
        assert_same(c.optimized(x), block(x))        # a hit would skip the hook
        assert minidynamo.counters["recompiles"] >= 1
    finally:
        handle.remove()


def test_grad_mode_change_is_guarded():
    c = Checker(lambda x: (x * 2).requires_grad)
    x = torch.randn(3, requires_grad=True)
    c.check(x, compiled=1)
    with torch.no_grad():
        c.check(x, compiled=2)
    c.check(x, compiled=2)


def test_autocast_is_guarded():
    c = Checker(lambda x, w: (x @ w).dtype)
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    c.check(x, w, compiled=1)
    with torch.autocast("cpu", dtype=torch.bfloat16):   # the entry traced without autocast must not run
        assert c.optimized(x, w) == torch.bfloat16
    assert "autocast" in last_recompile_reason()
    assert c.backend.compiles == 2                      # under autocast: an entry of its own
    assert c.optimized(x, w) == torch.float32 and c.backend.compiles == 2   # outside: the first again
    with torch.autocast("cpu", dtype=torch.float16):    # the region's dtype is guarded too
        assert c.optimized(x, w) == torch.float16
    assert c.backend.compiles == 3


def test_after_cache_size_limit_the_code_runs_eagerly_and_stays_right(monkeypatch):
    monkeypatch.setattr(minidynamo.config, "cache_size_limit", 2)
    backend = CountingBackend()
    fn = lambda x, n: x * n  # noqa: E731
    optimized = minidynamo.optimize(backend)(fn)
    x = torch.randn(3)
    for n in (1, 2, 3, 4, 2, 5):
        assert_same(optimized(x, n), fn(x, n))
    assert backend.compiles == 2
    reasons = minidynamo.counters["fallback_reasons"]
    assert len(reasons) == 1 and "cache_size_limit" in reasons[0]
    assert "L['n']: expected" in last_recompile_reason()


# -- code the trace inlined is replaced after the first call -------------------------------

class Greeter:
    def m(self, x):
        return x + 1

    @property
    def p(self):
        return 2

    @classmethod
    def c(cls, x):
        return x + 3


class Loud(Greeter):
    def m(self, x):
        return super().m(x) * 10


def test_replacing_a_method_on_the_class_recompiles():
    class Local(Greeter):
        pass

    c = Checker(lambda o, x: o.m(x) + o.p + o.c(x))
    o, x = Local(), torch.ones(2)
    c.check(o, x, compiled=1)
    Local.m = lambda self, x: x * 100
    c.check(o, x, compiled=2)
    Local.p = property(lambda self: 41)
    c.check(o, x, compiled=3)
    Local.c = classmethod(lambda cls, x: x - 5)
    c.check(o, x, compiled=4)


def test_shadowing_a_method_on_the_instance_recompiles():
    c = Checker(lambda o, x: o.m(x))
    o, x = Greeter(), torch.ones(2)
    c.check(o, x, compiled=1)
    o.m = lambda x: x - 7
    c.check(o, x, compiled=2)


def test_replacing_the_method_super_reaches_recompiles():
    class Base(Greeter):
        pass

    class Child(Base):
        def m(self, x):
            return super().m(x) * 10

    c = Checker(lambda o, x: o.m(x))
    o, x = Child(), torch.ones(2)
    c.check(o, x, compiled=1)
    Base.m = lambda self, x: x - 20
    c.check(o, x, compiled=2)


def test_replacing_a_submodule_forward_on_the_instance_recompiles():
    class Sub(torch.nn.Module):
        def forward(self, x):
            return x + 1

    class Top(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.sub = Sub()

        def forward(self, x):
            return self.sub(x) * 2

    model, x = Top(), torch.ones(2)
    c = Checker(model)
    c.check(x, compiled=1)
    model.sub.forward = lambda x: x * 33
    c.check(x, compiled=2)


def _helper(x):
    return x + 1


def test_swapping_an_inlined_function_code_recompiles():
    saved = _helper.__code__
    try:
        c = Checker(lambda x: _helper(x))
        x = torch.ones(2)
        c.check(x, compiled=1)
        _helper.__code__ = (lambda x: x * 50).__code__
        c.check(x, compiled=2)
    finally:
        _helper.__code__ = saved


def test_a_global_shadowing_a_builtin_recompiles():
    namespace = {"torch": torch}
    exec("def f(x, items):\n    return x + len(items)\n", namespace)
    c = Checker(namespace["f"])
    x = torch.ones(2)
    c.check(x, [1, 2], compiled=1)
    namespace["len"] = lambda items: 100
    c.check(x, [1, 2], compiled=2)
