"""Where eager copies only because of memory layout, the lazy device may not: force the copy.

``x.t().contiguous()`` copies in eager (the transpose is not contiguous), but on XLA, which has
no strides, it is the same functional view of ``x``: an in-place op on the result would write
through to the caller's ``x`` (fuzz finding X10).  The trace's meta example values record which
layout-dependent calls made a new storage in eager; each of those gets an explicit ``clone`` on
the device, so a later write stays local exactly as in eager.  A call that returned a view in
eager is left alone: there, writing through is what eager does too.
"""

from __future__ import annotations

import functools

import torch
import torch.fx

from .eager_faithful import op_name

# ops that return a view when the layout allows it and a copy otherwise
LAYOUT_DEPENDENT = frozenset({"contiguous", "reshape", "reshape_as", "flatten", "ravel"})
# conversions that return their input itself when it already is what they ask for, and a copy
# otherwise: a memory format asked for (``x.to(memory_format=torch.contiguous_format)`` of a
# channels-last ``x``) is such a change in eager, never on the device
CONVERSIONS = frozenset({"to", "type", "type_as"})


def force_eager_copies(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Insert ``clone`` after every layout-dependent call that copied in eager (in place)."""
    copied = [node for node in gm.graph.nodes if _copied_in_eager(node)]
    for node in copied:
        with gm.graph.inserting_after(node):
            clone = gm.graph.call_method("clone", (node,))
        node.replace_all_uses_with(clone, delete_user_cb=lambda user: user is not clone)
        clone.meta = dict(node.meta)
        clone.meta["example_value"] = node.meta["example_value"].clone()    # its own storage
    if copied:
        gm.recompile()
    return gm


def _copied_in_eager(node) -> bool:
    if node.op not in ("call_method", "call_function") or not node.args or node.meta.get("writes"):
        return False          # (an in-place op, ``F.relu(x, inplace=True)``, answers ``x`` itself)
    name = op_name(node.target)
    if not isinstance(node.args[0], torch.fx.Node):
        return False
    result, source = node.meta.get("example_value"), node.args[0].meta.get("example_value")
    if not isinstance(result, torch.Tensor) or not isinstance(source, torch.Tensor):
        return False
    shares = result.untyped_storage()._cdata == source.untyped_storage()._cdata
    if name in LAYOUT_DEPENDENT:
        return not shares
    if name in CONVERSIONS:        # (another dtype: the device converts, a new tensor there too)
        return not shares and result.dtype == source.dtype
    # A meta kernel that returns a view where the op's schema promises a new tensor (the meta of
    # channel_shuffle reshapes its input): eager's kernel allocated one.
    return shares and _returns_a_new_tensor(name)


@functools.lru_cache(maxsize=None)
def _returns_a_new_tensor(name: str) -> bool:
    """Whether aten's functional ``name`` (its overload without a name) returns tensors that
    alias none of its inputs, by its schema."""
    schemas = [s for s in torch._C._jit_get_schemas_for_operator(f"aten::{name}") if s.overload_name == ""]
    return bool(schemas) and all(r.alias_info is None for r in schemas[0].returns)
