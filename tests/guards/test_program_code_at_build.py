"""Building a guard must not run the program's code: names, types and renderings of the
objects it pins are read through ``type``'s own descriptors, never through a user
``__getattr__`` or ``__repr__`` (which may raise anything, or count their calls)."""

import torch
from torch import nn

import minidynamo
from guards.checks import name_hint, show, type_name


class Config(nn.Module):
    """Hugging Face style: unknown attributes come from a config dict (KeyError, not AttributeError)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.cfg = {"k": 2}

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return self.cfg[name]

    def forward(self, x):
        return self.lin(x) * self.k


def test_a_module_whose_getattr_raises_key_error_compiles_and_replays():
    minidynamo.reset()
    model, x = Config(), torch.randn(3, 4)
    optimized = minidynamo.optimize("eager")(model)
    for _ in range(2):
        assert torch.allclose(optimized(x), model(x))
    model.cfg["k"] = 3                                   # read through the dict: still seen
    assert torch.allclose(optimized(x), model(x))
    minidynamo.reset()


class Loud:
    calls = 0

    def __getattr__(self, name):
        Loud.calls += 1
        raise KeyError(name)

    def __repr__(self):
        Loud.calls += 1
        raise RuntimeError("no repr")


def test_names_and_renderings_never_ask_the_object():
    Loud.calls = 0
    loud = Loud()
    assert name_hint(loud) == "Loud"
    assert show(loud).startswith("<") and "Loud object at" in show(loud)
    assert show([1, loud]).startswith("<list object")
    assert Loud.calls == 0
    assert show((1, "a", None)) == "(1, 'a', None)"


def test_a_class_without_a_module_has_a_name():
    nameless = eval("type('Nameless', (), {})", {})     # no __name__ in its globals: no __module__
    assert type_name(nameless) == "Nameless" and name_hint(nameless) == "Nameless"
