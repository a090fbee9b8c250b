"""Global flags that change what an eager kernel does on the host.

A few process-wide switches decide what some of torch's host kernels do, though no argument
says so: under ``torch.use_deterministic_algorithms(True)`` ``torch.empty`` fills its memory
with NaN and ``put_`` / ``max_unpool2d`` raise; with the math and flash kernels of
``scaled_dot_product_attention`` switched off (``sdpa_kernel``), the host has no kernel for it
and raises.  A graph holding such an op is right only under the flags it was traced under, so
the trace guards them (a program that flips one between calls recompiles).  A device compiler
reads none of them: where one is not at its default, the op is marked
(``node.meta["kernel_flags"]``) and the XLA bridge runs the graph eagerly, which then does what
eager does (``xla_bridge/graph_refusals.py``).
"""

from __future__ import annotations

import guards

# The torch state functions (``guards.TorchStateSource``) each flag is read by, with the value
# torch starts with.
DETERMINISTIC = {"are_deterministic_algorithms_enabled": False,
                 "is_deterministic_algorithms_warn_only_enabled": False,
                 "_C._get_deterministic_fill_uninitialized_memory": True}
SDPA = {"_C._get_flash_sdp_enabled": True, "_C._get_math_sdp_enabled": True}

# Op (by name, as ``torch.empty``, ``Tensor.resize_`` or ``aten.put_`` name it) -> its flags.
# Functions the graph calls whole count by what they run: multi-head attention (the module's
# functional form, and torch's fused kernels of it and of a transformer layer) runs SDPA.
FLAGS_OF_OP = {
    **dict.fromkeys(("empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided",
                     "empty_permuted", "new", "resize_", "resize_as_"), DETERMINISTIC),   # NaN-filled
    **dict.fromkeys(("put_", "put", "max_unpool1d", "max_unpool2d", "max_unpool3d"), DETERMINISTIC),  # raise
    **dict.fromkeys(("scaled_dot_product_attention", "multi_head_attention_forward",
                     "_native_multi_head_attention", "_transformer_encoder_layer_fwd"), SDPA),
}


def op_name(target) -> str:
    overload = getattr(target, "overloadpacket", None)      # aten.put_.default -> put_
    if overload is not None:
        return overload.__name__
    return target if isinstance(target, str) else getattr(target, "__name__", "")


def note(output, node) -> None:
    """Guard the flags ``node``'s op reads, and mark the node where one is not at its default."""
    flags = FLAGS_OF_OP.get(op_name(node.target))
    if flags is None:
        return
    changed = []
    for function, default in flags.items():
        guard = guards.torch_state_match(function)
        output.add_guard(guard)
        if guard.expected != default:
            changed.append(f"{function}() is {guard.expected}")
    if changed:
        node.meta["kernel_flags"] = ", ".join(changed)
