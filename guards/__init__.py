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
compiled helpers: ``_tensor_match.cpp`` reads tensor metadata from at::Tensor and runs a guard's
common path as a ``FastGuard``, ``_guard_helpers.c`` holds the torch-free memo and class checks),
``fast_path`` (the common path's steps as FastGuard ops, the reader's reads as a native
``Reader``, and the ``HandOff`` of the inputs a passing FastGuard read to the reader).

Two layers: the plain reference layer says what each guard means (``source``: how to read a
value; ``guard``: kinds and facts; ``reference``: one plain read per source, one predicate per
kind, and the plain list that ``describe_guard`` prints); the fast layer decides the same faster
(``planner``'s dict shortcuts, ``memo``, ``native``, ``fast_path``), with the generated Python
(``guard_fn.source``) as its readable form.
Besides values at sources, guards cover global torch state (``torch_state_match``: the default
dtype on every entry, the default device, inference mode, ...), attributes that must stay
absent on an object and its class's MRO (``absent_match``), what an isinstance / issubclass /
callable answer read from a class (``class_match``: its MRO, its lookups, the ABC registries),
which sources hold one object (``alias_match``, ``distinct_match``), which tensors share one
storage (``storage_match``) and what kind of view, for autograd, tensors written in place are
(``autograd_views_match``).  Attribute shortcuts through module dicts stay exact while no class
defines the names read past it (``native.class_lacks``, one check per entry).
Layers: this package never imports minidynamo (it sits below it) nor torch._dynamo.
"""

from .codegen import GuardFunction, build_guard_function
from .guard import (
    NOT_FOUND, Guard, TensorSpec, UnguardableValue, absent_match, alias_match, autocast_match, autograd_view, class_lookup,
    container_base,
    autograd_views_match, class_match, distinct_match, default_dtype_match, mro_of,
    torch_state_match, dict_keys_match, equals_match, compare_match, COMPARISONS, MIRRORED, global_hooks_empty,
    grad_mode_match, id_match, length_match, module_state_match, storage_match, tensor_match, type_match,
)
from .source import (
    AttrSource, AutocastSource, BuiltinSource, ClassSource, ClosureSource, FrameInfo, GenericAttrSource,
    GlobalModuleHooksSource, GlobalSource, GradModeSource, HeldSource, ItemSource, LocalSource, Source, CallSource, NamespaceSource,
    TorchStateSource,
)
from .reader import compile_reader

__all__ = [
    "AttrSource", "AutocastSource", "autocast_match", "BuiltinSource", "ClosureSource", "FrameInfo", "GenericAttrSource",
    "GlobalModuleHooksSource",
    "GlobalSource", "GradModeSource", "Guard", "GuardFunction", "ItemSource", "LocalSource",
    "Source", "TensorSpec", "UnguardableValue", "build_guard_function", "compile_reader",
    "dict_keys_match", "equals_match", "compare_match", "COMPARISONS", "MIRRORED", "global_hooks_empty", "grad_mode_match", "id_match",
    "length_match", "module_state_match", "tensor_match", "type_match", "absent_match", "alias_match", "distinct_match",
    "storage_match", "autograd_views_match", "autograd_view",
    "default_dtype_match", "torch_state_match", "CallSource", "NamespaceSource", "TorchStateSource",
    "ClassSource", "HeldSource", "class_match", "class_lookup", "container_base", "mro_of", "NOT_FOUND",
]
