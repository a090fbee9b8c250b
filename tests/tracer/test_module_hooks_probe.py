"""Module hooks run as ``nn.Module._call_impl`` runs them, call by call (probe of the traced hooks).

``_call_impl`` reads each hook dict when its turn comes (the forward hooks only after forward: a
pre-hook or forward itself may have changed them), asks whether a hook takes kwargs just before
calling it, and hands every hook the same ``args`` and ``kwargs`` objects, so a with-kwargs hook
that writes the kwargs dict in place changes what forward and the later hooks get.  Each case
compares a compiled model with an eager twin over several calls."""

import pytest
import torch
from torch import nn

import minidynamo


@pytest.fixture(autouse=True)
def _fresh():
    minidynamo.reset()
    yield
    minidynamo.reset()


class Scaled(nn.Module):
    def forward(self, x, scale=1.0):
        return x * scale


class Outer(nn.Module):
    """Calls its child with a keyword argument, so with-kwargs hooks have something to see."""

    def __init__(self):
        super().__init__()
        self.inner = Scaled()

    def forward(self, x):
        return self.inner(x, scale=2.0) + 1


def tiny():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))


def assert_twins_match(make, calls=3, between=lambda model: None):
    """``make()`` twice: one model runs eagerly, the other compiled; ``between`` changes both."""
    eager_model, compiled_model = make(), make()
    compiled = minidynamo.optimize("eager")(compiled_model)
    for i in range(calls):
        x = torch.randn(3, 4) + i
        torch.testing.assert_close(compiled(x), eager_model(x))
        between(eager_model)
        between(compiled_model)


# -- the kwargs dict is one object through the call ----------------------------------------------

def test_a_pre_hook_writing_the_kwargs_in_place_changes_what_forward_gets():
    def make():
        model = Outer()

        def triple_the_scale(module, args, kwargs):
            kwargs["scale"] = kwargs["scale"] * 3        # returns None: the same dict goes on
        model.inner.register_forward_pre_hook(triple_the_scale, with_kwargs=True)
        return model

    assert_twins_match(make)
    assert minidynamo.counters["fallbacks"] == 0


def test_a_forward_hook_writing_the_kwargs_is_seen_by_the_next_hook():
    def make():
        model = Outer()
        model.inner.register_forward_hook(lambda m, args, kwargs, out: kwargs.update(scale=100.0),
                                          with_kwargs=True)
        model.inner.register_forward_hook(lambda m, args, kwargs, out: out * kwargs["scale"], with_kwargs=True)
        return model

    assert_twins_match(make)


def test_args_a_pre_hook_gives_as_a_list_reach_the_forward_hooks_as_that_list():
    def make():
        model = Outer()
        model.inner.register_forward_pre_hook(lambda m, args, kwargs: ([args[0] + 1], kwargs), with_kwargs=True)
        model.inner.register_forward_hook(lambda m, args, out: out * 10 if type(args) is list else out)
        return model

    assert_twins_match(make)


# -- each hook dict is read when nn.Module reads it ----------------------------------------------

def test_forward_hooks_a_pre_hook_removes_do_not_run():
    def make():
        model = tiny()
        model[1].register_forward_pre_hook(lambda m, args: m._forward_hooks.clear())
        model[1].register_forward_hook(lambda m, args, out: out * 5)
        return model

    assert_twins_match(make, between=lambda model: model[1].register_forward_hook(lambda m, a, out: out * 5))


def test_a_forward_hook_a_pre_hook_adds_runs_in_the_same_call():
    def times_five(m, args, out):
        return out * 5

    def add_the_hook(m, args):
        if not m._forward_hooks:
            m._forward_hooks[10 ** 9] = times_five
    def make():
        model = tiny()
        model[1].register_forward_pre_hook(add_the_hook)
        return model

    assert_twins_match(make, between=lambda model: model[1]._forward_hooks.clear())


def test_hooks_forward_removes_do_not_run_after_it():
    class ClearsItsHooks(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            self._forward_hooks.clear()
            return self.lin(x)

    def add_hook(model):
        model[0].register_forward_hook(lambda m, args, out: out * 100)

    def make():
        torch.manual_seed(0)
        model = nn.Sequential(ClearsItsHooks(), nn.ReLU())
        add_hook(model)
        return model

    assert_twins_match(make, between=add_hook)


def test_whether_a_hook_takes_kwargs_is_read_when_it_is_called():
    def make():
        model = Outer()
        later = {}

        def switch_the_next_to_kwargs(m, args, out):
            m._forward_hooks_with_kwargs[later["id"]] = True

        def count_arguments(m, *rest):                # (args, out) or (args, kwargs, out)
            return rest[-1] * len(rest)
        model.inner.register_forward_hook(switch_the_next_to_kwargs)
        later["id"] = model.inner.register_forward_hook(count_arguments).id
        return model

    def forget_the_switch(model):
        model.inner._forward_hooks_with_kwargs.clear()

    assert_twins_match(make, between=forget_the_switch)


def test_a_hook_dict_written_under_another_name_is_not_missed():
    """A hook on layer 0 adds a pre-hook to layer 2 through its own name for the model: the
    trace must not take layer 2's (then empty) hook dict as it was before the call."""
    def times_ten(m, args):
        return args[0] * 10

    def make():
        model = tiny()

        def add_to_the_last_layer(m, args, out):
            model[2]._forward_pre_hooks[10 ** 9] = times_ten
        model[0].register_forward_hook(add_to_the_last_layer)
        return model

    assert_twins_match(make, between=lambda model: model[2]._forward_pre_hooks.clear())
