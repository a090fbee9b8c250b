"""The tracer answers some nn.Module methods from its own model of nn.Module (``children()``,
``parameters()``, iteration, subscripts, ``keys()``) and inlines library ``forward``s without
guarding the library's class. Both hold only while the method found is torch's own: a user
class's override and a function stored on the instance are the user's code, run as written,
and storing one after the capture recompiles."""

import torch
from torch import nn

import minidynamo


def optimized_matches_eager(model, x, change=None):
    """Two calls of the optimized model (with ``change`` applied between them) give eager's
    answer each time."""
    optimized = minidynamo.optimize("eager")(model)
    torch.testing.assert_close(optimized(x), model(x))
    if change is not None:
        change(model)
        torch.testing.assert_close(optimized(x), model(x))


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x)) + 0.1
        return x


def test_a_forward_stored_on_a_library_module_after_the_capture_recompiles():
    x = torch.randn(2, 4)
    optimized_matches_eager(Stack(), x, lambda m: setattr(m.layers[2], "forward", lambda t: t * 5))
    assert any("instance __dict__" in reason for reason in minidynamo.counters["recompile_reasons"])


def test_a_parameters_method_stored_on_the_instance_after_the_capture_recompiles():
    class Summing(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            return sum(p.sum() for p in self.parameters()) * x

    optimized_matches_eager(Summing(), torch.randn(2, 3),
                            lambda m: setattr(m, "parameters", lambda: iter([torch.ones(1)])))


def test_a_user_class_overriding_parameters_and_children_runs_its_own_code():
    class Picky(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(3, 3), nn.Linear(3, 3)

        def parameters(self, recurse=True):
            return iter([self.a.weight])

        def children(self):
            return iter([self.b])

        def forward(self, x):
            total = sum(p.sum() for p in self.parameters())
            for child in self.children():
                x = child(x)
            return x * total

    optimized_matches_eager(Picky(), torch.randn(2, 3))


def test_container_subclasses_overriding_keys_and_iteration_run_their_own_code():
    class OnlyB(nn.ModuleDict):
        def keys(self):
            return ["b"]

    class Reversed(nn.ModuleList):
        def __iter__(self):
            return iter(list(self._modules.values())[::-1])

    class Uses(nn.Module):
        def __init__(self):
            super().__init__()
            self.d = OnlyB({"a": nn.Linear(3, 3), "b": nn.Linear(3, 3)})
            self.l = Reversed([nn.Linear(3, 3), nn.Tanh()])

        def forward(self, x):
            for key in self.d.keys():
                x = self.d[key](x)
            for layer in self.l:
                x = layer(x)
            return x

    optimized_matches_eager(Uses(), torch.randn(2, 3))


def test_the_truth_of_a_module_asks_its_len_and_bool():
    """PyTorch's test_if_cond_nn_mod2/3: an empty Sequential or ModuleList is false (its
    ``__len__``); a module with its own ``__bool__`` or ``__len__`` answers through it; any other
    module is true.  The trace took every module for true."""
    class Gated(nn.Module):
        def __init__(self, on):
            super().__init__()
            self.on = on

        def __bool__(self):
            return self.on

    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.Sequential()
            self.gate = Gated(False)

        def forward(self, x):
            x = x + 1 if self.layers else x - 1
            x = x * 2 if self.gate else x * 3
            return x + 10 if nn.ModuleList() else x

    model = Holder()
    compiled = minidynamo.optimize("eager")(model)
    x = torch.zeros(2)
    torch.testing.assert_close(compiled(x), model(x))
    model.layers.append(nn.Identity())                 # no longer empty: the guard on its keys
    model.gate.on = True
    torch.testing.assert_close(compiled(x), model(x))
