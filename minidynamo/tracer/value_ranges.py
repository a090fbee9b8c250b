"""Comparisons Python can decide without a tensor's data: a uniform draw lies in [0, 1).

LayerDrop in Hugging Face's encoders and decoders (Bart, Pegasus, Marian, M2M-100, Whisper,
wav2vec2, ...) draws ``p = torch.rand([])`` in training and asks ``if p < self.layerdrop``: a
branch on a tensor's value, a graph break at every layer.  With the default ``layerdrop = 0.0``
the answer is False whatever ``p`` holds, since ``torch.rand`` draws from [0, 1): the graph
still draws (the generator moves as in eager), and Python takes the branch eager takes.

A float32/float64 tensor made by ``rand``/``rand_like`` carries that range until something
writes it (its example's version counter moves); ``<``, ``<=``, ``>``, ``>=`` of it and a Python
number outside the range's interior have one answer for every element, which becomes the
comparison's known value (``TensorVariable.known``, as for tensors made from constants).
"""

from __future__ import annotations

import operator
from typing import Optional

import torch

# The ops whose every element is drawn from [0, 1), by the name their target goes by.
UNIT_DRAWS = {"rand", "rand_like"}
_DTYPES = (torch.float32, torch.float64)     # (a 16-bit draw may round up to 1.0)
# comparison name (``torch.lt``, ``Tensor.__lt__``, ``operator.lt``) -> the operator
_COMPARISONS = {"lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge,
                "__lt__": operator.lt, "__le__": operator.le, "__gt__": operator.gt, "__ge__": operator.ge}
_MIRRORED = {operator.lt: operator.gt, operator.le: operator.ge, operator.gt: operator.lt, operator.ge: operator.le}


def note_draw(vt, name: str) -> None:
    """Mark ``vt`` (an op's result) as drawn from [0, 1) when ``name`` is a unit draw."""
    if name in UNIT_DRAWS and vt.example.dtype in _DTYPES:
        vt.unit_draw_version = vt.example._version


def _in_unit_range(vt) -> bool:
    version = getattr(vt, "unit_draw_version", None)
    return version is not None and vt.example._version == version


def decided(name: str, args, example) -> Optional[torch.Tensor]:
    """The known value of comparison ``name`` of ``args`` (trackers), or None when the data decides."""
    from .variables.constant import ConstantVariable

    compare = _COMPARISONS.get(name)
    if compare is None or len(args) != 2 or not isinstance(example, torch.Tensor):
        return None
    draw, other = args
    if not _in_unit_range(draw):            # ``c < d``: ``d > c``
        draw, other, compare = other, draw, _MIRRORED[compare]
    if not _in_unit_range(draw) or not isinstance(other, ConstantVariable) or \
            type(other.value) not in (int, float, bool) or other.value != other.value:
        return None
    c = other.value
    # the draw d is in [0, 1): the answer for d = 0 and for d just below 1 agree, or the data decides
    low, high = compare(0.0, c), compare(1.0 - 2 ** -53, c)
    if low != high:
        return None
    return torch.full(example.shape, low, dtype=torch.bool)
