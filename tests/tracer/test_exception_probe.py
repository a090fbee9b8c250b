"""Exceptions: what an optimized call raises, and what it leaves behind, is eager's.

Found by a hand-written probe of exceptions (programs called several times, some calls raising,
compared with eager: the value or the exception, arguments, globals, stdout):

- a ``try`` whose handler catches a warning class (``except UserWarning``) around tensor ops
  that write an argument in place was taken as catching nothing a kernel raises; with the
  program's filters turning warnings into errors, the graph's ``F.mse_loss`` raised at call
  time, and the compiled code let it through where eager's handler caught it;
- the hook's "does this frame hold anything of torch" check asked ``isinstance`` of each
  argument, which reads ``__class__`` through a user ``__getattribute__``: a config object
  whose hook refuses unknown names raised out of a frame the program never made.
"""

import warnings

import pytest
import torch
import torch.nn.functional as F

import minidynamo


@pytest.fixture(autouse=True)
def fresh_caches():
    minidynamo.reset()
    yield
    minidynamo.reset()


def loss_or_none(x, y, seen):
    seen.add_(1)
    try:
        loss = F.mse_loss(x, y)        # sizes that broadcast: a UserWarning at every call
    except UserWarning:
        loss = None
    return loss


@pytest.mark.parametrize("handler", ["UserWarning", "Warning"])
def test_a_warning_made_an_error_reaches_the_programs_handler(handler):
    source = loss_or_none if handler == "UserWarning" else _catching_any_warning
    compiled = minidynamo.optimize("eager")(source)
    x, y = torch.ones(2, 3), torch.ones(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.testing.assert_close(compiled(x, y, torch.zeros(2)), torch.tensor(0.0))
    for call in (source, compiled):
        seen = torch.zeros(2)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert call(x, y, seen) is None
        assert seen.tolist() == [1.0, 1.0]


def _catching_any_warning(x, y, seen):
    seen.add_(1)
    try:
        loss = F.mse_loss(x, y)
    except Warning:
        loss = None
    return loss


class StrictConfig:
    """Answers the names it holds; any other name, even ``__class__``, is an error."""

    def __init__(self, values):
        object.__setattr__(self, "_values", values)

    def __getattribute__(self, name):
        if name == "_values":
            return object.__getattribute__(self, name)
        values = self._values
        if name not in values:
            raise RuntimeError(f"no setting {name}")
        return values[name]


def scaled(x, config):
    return x * config.scale


def test_an_argument_whose_getattribute_refuses_class_runs_as_in_eager():
    compiled = minidynamo.optimize("eager")(scaled)
    for scale in (2, 3):
        config = StrictConfig({"scale": scale})
        torch.testing.assert_close(compiled(torch.ones(2), config), scaled(torch.ones(2), config))
    with pytest.raises(RuntimeError, match="no setting scale"):
        compiled(torch.ones(2), StrictConfig({}))
