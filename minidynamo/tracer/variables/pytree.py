"""``torch.utils._pytree`` over traced containers: one table of pure functions.

``tree_leaves(x)``, ``tree_flatten(x)``, ``tree_unflatten(leaves, spec)``, ``tree_map(fn, x, ...)``
and ``tree_structure(x)`` are answered by running the REAL pytree function on a *skeleton*: the
traced container rebuilt as real tuples/lists/dicts/namedtuples whose leaves are ``_Leaf``
tokens (numbered stand-ins).  pytree only reads the structure, so its answer, with the tokens
mapped back to trackers, is exactly its answer on the real values (``None`` stays ``None`` in the
skeleton, so pytree itself decides what it is).  A TreeSpec is a
constant of the trace.  ``tree_map``'s function is inlined on each leaf, in pytree's order.

Only containers the tracer models as plain containers are walked (tuple, list, namedtuple, dict
with constant keys, None); any other object is a leaf in pytree only when pytree does not know
its type, so one of a registered type (a ``ModelOutput`` made in the frame) is refused.
"""

from __future__ import annotations

import torch.utils._pytree as pytree

from ...exc import Unsupported
from .base import KnownObjectVariable
from .constant import ConstantVariable
from .containers import BaseListVariable, ListVariable, NamedTupleVariable, TupleVariable, sequence_kind
from .dicts import DictVariable


class _Leaf:
    """A numbered stand-in for one tracked leaf (never a pytree node)."""

    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index


def skeleton(vt, leaves: list):
    """The real structure of ``vt`` with ``_Leaf`` tokens; ``leaves`` collects the trackers."""
    if sequence_kind(vt) in (tuple, list) or isinstance(vt, NamedTupleVariable):
        items = [skeleton(i, leaves) for i in vt.items]
        if isinstance(vt, NamedTupleVariable):
            return vt.python_type()(*items)
        return list(items) if isinstance(vt, ListVariable) else tuple(items)
    if type(vt) is DictVariable:
        kind = vt.python_type()
        if kind is not dict and kind not in pytree.SUPPORTED_NODES:
            raise Unsupported(f"pytree over a {kind.__name__}")
        return kind((k, skeleton(v, leaves)) for k, v in vt.items.items())
    if isinstance(vt, ConstantVariable) and vt.value is None:
        return None
    if isinstance(vt, (BaseListVariable, DictVariable)):
        raise Unsupported(f"pytree over {vt}")
    try:
        kind = vt.python_type()
    except Unsupported:
        kind = None
    if kind is not None and kind in pytree.SUPPORTED_NODES:
        raise Unsupported(f"pytree over a {kind.__name__} (a registered pytree node the tracer does not walk)")
    leaves.append(vt)
    return _Leaf(len(leaves) - 1)


def rebuild(value, leaves: list):
    """The tracker for a real structure holding ``_Leaf`` tokens (pytree's output)."""
    if isinstance(value, _Leaf):
        return leaves[value.index]
    if value is None:
        return ConstantVariable(None)
    if isinstance(value, list):
        return ListVariable([rebuild(v, leaves) for v in value])
    if isinstance(value, tuple) and hasattr(type(value), "_fields"):
        return NamedTupleVariable([rebuild(v, leaves) for v in value], type(value))
    if isinstance(value, tuple):
        return TupleVariable([rebuild(v, leaves) for v in value])
    if isinstance(value, dict):
        return DictVariable({k: rebuild(v, leaves) for k, v in value.items()}, type(value))
    from ..builder import wrap_constant_result

    return wrap_constant_result(value)


def _leaves(tx, tree, is_leaf=None):
    if is_leaf is not None and not (isinstance(is_leaf, ConstantVariable) and is_leaf.value is None):
        raise Unsupported("pytree with is_leaf= (not modelled)")
    found: list = []
    real = skeleton(tree, found)
    return real, found


def _tree_leaves(tx, tree, is_leaf=None):
    real, found = _leaves(tx, tree, is_leaf)
    return ListVariable([rebuild(leaf, found) for leaf in pytree.tree_leaves(real)])


def _tree_flatten(tx, tree, is_leaf=None):
    real, found = _leaves(tx, tree, is_leaf)
    tokens, spec = pytree.tree_flatten(real)
    return TupleVariable([ListVariable([rebuild(t, found) for t in tokens]), KnownObjectVariable(spec)])


def _tree_structure(tx, tree, is_leaf=None):
    real, _ = _leaves(tx, tree, is_leaf)
    return KnownObjectVariable(pytree.tree_structure(real))


def _tree_unflatten(tx, leaves, spec):
    items = leaves.unpack(tx)
    spec = spec.as_python_constant()
    if not isinstance(spec, pytree.TreeSpec):
        raise Unsupported("tree_unflatten without a TreeSpec")
    real = pytree.tree_unflatten([_Leaf(i) for i in range(len(items))], spec)
    return rebuild(real, items)


def _tree_map(tx, fn, tree, *rests, is_leaf=None):
    real, found = _leaves(tx, tree, is_leaf)
    tokens, spec = pytree.tree_flatten(real)
    columns = [[rebuild(t, found) for t in tokens]]
    for rest in rests:
        rest_real, rest_found = _leaves(tx, rest, is_leaf)
        rest_tokens = spec.flatten_up_to(rest_real)
        columns.append([rebuild(t, rest_found) for t in rest_tokens])
    results = [fn.call_function(tx, list(row), {}) for row in zip(*columns)]
    return rebuild(pytree.tree_unflatten([_Leaf(i) for i in range(len(results))], spec), results)


PYTREE_FUNCTIONS = {
    pytree.tree_leaves: _tree_leaves,
    pytree.tree_flatten: _tree_flatten,
    pytree.tree_structure: _tree_structure,
    pytree.tree_unflatten: _tree_unflatten,
    pytree.tree_map: _tree_map,
}


class PytreeFunctionVariable(KnownObjectVariable):
    """One of ``PYTREE_FUNCTIONS`` (the real function is its constant)."""

    def call_function(self, tx, args, kwargs):
        try:
            return PYTREE_FUNCTIONS[self.value](tx, *args, **kwargs)
        except TypeError as e:
            raise Unsupported(f"pytree.{self.value.__name__} called with unsupported arguments: {e}") from e

    def __repr__(self):
        return f"PytreeFunctionVariable({self.value.__name__})"
