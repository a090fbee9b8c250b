"""Guards: cheap, sound checks that a cached graph still fits the frame about to run.

    from guards import LocalSource, tensor_match, FrameInfo, build_guard_function
    x = torch.ones(2, 3)
    guard_fn = build_guard_function([tensor_match(LocalSource("x"), x)],
                                    FrameInfo(("x",), globals(), __builtins__))
    guard_fn(f, x)                      # True
    guard_fn.failure_reason(f, x.half())  # "L['x'].dtype: expected torch.float32, got torch.float16"
    print(guard_fn.source)              # the generated Python

One module per idea: ``source`` (where values come from), ``guard`` (what is expected, the
factories), ``checks`` (each kind as Python tests), ``module_facts`` (nn.Module attribute
rules), ``planner`` (how to read each source once and exactly), ``codegen`` (tree order,
the generated function), ``slow_path`` (the failure reason), ``reader`` (graph inputs),
``memo`` (dict version tags let a hit skip what cannot have changed), ``native`` (the
optional compiled helpers: ``_tensor_match.cpp`` reads tensor metadata from at::Tensor,
``_guard_helpers.c`` does the rest).
Layers: this package never imports minidynamo (it sits below it) nor torch._dynamo.
"""

from .codegen import GuardFunction, build_guard_function
from .guard import (
    Guard, TensorSpec, UnguardableValue, autocast_match, dict_keys_match, equals_match, global_hooks_empty,
    grad_mode_match, id_match, length_match, module_state_match, tensor_match, type_match,
)
from .source import (
    AttrSource, AutocastSource, BuiltinSource, ClosureSource, FrameInfo, GlobalModuleHooksSource,
    GlobalSource, GradModeSource, ItemSource, LocalSource, Source,
)
from .reader import compile_reader

__all__ = [
    "AttrSource", "AutocastSource", "autocast_match", "BuiltinSource", "ClosureSource", "FrameInfo", "GlobalModuleHooksSource",
    "GlobalSource", "GradModeSource", "Guard", "GuardFunction", "ItemSource", "LocalSource",
    "Source", "TensorSpec", "UnguardableValue", "build_guard_function", "compile_reader",
    "dict_keys_match", "equals_match", "global_hooks_empty", "grad_mode_match", "id_match",
    "length_match", "module_state_match", "tensor_match", "type_match",
]
