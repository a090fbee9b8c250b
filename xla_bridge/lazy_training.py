"""``LazyTraining`` (``torchxla_trivial``): the graph runs lazily on the device with autograd on,
so PyTorch/XLA's lazy tensors carry the backward: traced again on every call, the contrast. It
refuses what the replayed path refuses (an output viewing an argument, an in-place write to an
argument that requires grad) and lays non-compact outputs out as eager does, autograd kept.

Its autograd graph is PyTorch/XLA's own, so saved tensors are checked by autograd; one that is
the device copy of a caller's tensor, or that a returned output views or detaches (one version
counter in eager), is watched through the caller's (``_SavedOnDevice``).
"""

from __future__ import annotations

import torch
from torch.utils import _pytree as pytree

from . import device as dev
from .aliasing import rebuild_output_views, shares_version
from .guarded_views import guard_views_as_eager
from .counters import counters
from .decompose import decomposing
from .dtype_check import DtypeWatch, converting_dtypes
from .eager_faithful import backward_differs, eager_faithful
from .eager_layouts import run_noting_nodes
from .host_random import GeneratorRewind, HostDraws
from .index_check import IndexOutOfRange, require_finite, watching_indices
from .joint_graph import NotDifferentiable, refuse_guarded_views, refuse_writes_that_require_grad
from .training import (
    _NO_DEVICE_BACKWARD, NO_GRAD_NEEDED, _arguments, _check_version, _refuse_saved_tensor_hooks,
    _requires_grad, _version,
)


def _storage_key(tensor):
    try:
        return tensor.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError):
        return None


def _outputs_sharing_versions(device_leaves, home) -> dict:
    """{storage key: [(device output, the caller's copy)]} of the outputs that come home."""
    by_storage = {}
    for leaf in device_leaves:
        if isinstance(leaf, torch.Tensor) and id(leaf) in home:
            key = _storage_key(leaf)
            if key is not None:
                by_storage.setdefault(key, []).append((leaf, home[id(leaf)]))
    return by_storage


def _output_moving_version(saved, by_storage):
    """The caller's copy of an output whose writes move ``saved``'s version counter in eager (a
    view or ``detach()`` of it: eager's backward then refuses), or None."""
    for leaf, caller in by_storage.get(_storage_key(saved), ()):
        if leaf is not saved and shares_version(leaf, saved):
            return caller
    return None


def _views_an_argument(bridged) -> bool:
    """An output views an argument's memory (an argument returned itself is not a view)."""
    return any(not view.itself for view in bridged.views.values())


class _SavedOnDevice:
    """A tensor autograd saved while the trivial path ran the graph on the device. When it is
    the device copy of a caller's tensor (a host argument, or an output brought home), eager
    would have saved the caller's tensor: unpacking it checks that one's version instead."""

    __slots__ = ("tensor", "version", "watch")

    def __init__(self, tensor):
        # a hooked saved tensor escapes autograd's own version check: it is made here
        self.tensor, self.version, self.watch = tensor, _version(tensor), None

    def unpack(self):
        _check_version(self.tensor, self.version, "a tensor")
        if self.watch is not None:
            _check_version(*self.watch)
        return self.tensor


def _own_data_per_position(device_args, needs_grad) -> None:
    """Give each position of the lazy trace device data of its own (``dev.own_data_per_position``);
    a shared one that requires grad cannot be copied without cutting autograd: eager runs it."""
    identities = dev.data_identities(device_args)
    shared_grad = [p for p in dev.positions_sharing_data(identities) if needs_grad[p]]
    if shared_grad:
        raise NotDifferentiable(f"arguments {shared_grad} that require grad hold the device data of an "
                                f"earlier argument (torch_xla's graph hash cannot tell them apart)")
    dev.own_data_per_position(device_args, identities)


class LazyTraining:
    """The grad-mode path of ``torchxla_trivial``: the graph runs lazily on the device with
    autograd on (host tensors that require grad move with a differentiable ``.to``), synced
    after the forward; the backward is traced lazily by PyTorch/XLA on every call."""

    def __init__(self, bridged):
        self.bridged = bridged
        self.dtypes_checked = False      # the first call checks the device's dtypes (dtype_check)
        self.draws = False               # and whether the graph draws random numbers (host_random)
        self.converts = False
        self.faithful = eager_faithful(bridged.flat.graph_module, training=True,   # ops traced as eager answers
                                       answered=bridged.flat.formulas_answered)
        self.backward_differs = backward_differs(bridged.flat.graph_module)

    def __call__(self, inputs):
        bridged = self.bridged
        args, needs_grad = _arguments(bridged, inputs)
        if not any(needs_grad):
            return NO_GRAD_NEEDED
        _refuse_saved_tensor_hooks()
        # As on the replayed path: the device copy of an argument is not the caller's tensor, so
        # an output viewing it would not view the caller's, and an in-place write to it would
        # escape autograd's check on leaves (eager raises there).
        if _views_an_argument(bridged):
            raise NotDifferentiable("an output is a view of an argument")
        written = [p for p in bridged.written if needs_grad[p]]
        if written:
            raise NotDifferentiable(f"the graph writes in place to arguments that require grad "
                                    f"(positions {written})")
        # each position gets its own device copy: a write through one would not reach another
        # argument viewing the same memory (``f(p.data, p)``), as the inference path checks too
        if bridged.written and bridged.host_inputs.aliased(bridged.written, args, bridged.device_positions):
            raise NotDifferentiable("an argument the graph writes in place shares memory with "
                                    "another argument")
        if not dev.backward_on_device():
            raise NotDifferentiable(_NO_DEVICE_BACKWARD)
        if self.backward_differs:
            raise NotDifferentiable(self.backward_differs)
        device_args, _ = bridged.host_inputs(args)
        device = dev.xla_device()
        for position in bridged.host_positions:
            if needs_grad[position]:
                device_args[position] = torch.Tensor.to(args[position], device)
        saved = []

        def pack(tensor):
            require_finite([tensor])     # what torch_xla's backward reads (index_check)
            saved.append(_SavedOnDevice(tensor))
            return saved[-1]

        if not self.dtypes_checked:          # once, on copies: the caller's tensors untouched
            with dev.host_random_kept(), torch.no_grad(), HostDraws() as drawn, DtypeWatch() as dtypes, \
                    decomposing(self.faithful):
                run_noting_nodes(bridged.flat, dev.device_copies(device_args), drawn.layouts)
            if drawn.reason():
                raise NotDifferentiable(drawn.reason())
            if dtypes.reason():
                raise NotDifferentiable(dtypes.reason())
            self.draws = bool(drawn.draws)
            self.dtypes_checked = True
            self.converts = dtypes.converts     # then every call converts those results, as the check did
        _own_data_per_position(device_args, needs_grad)
        host_tensors = [p for p in bridged.host_positions if not needs_grad[p]]
        before = dev.data_identities([device_args[p] for p in host_tensors])
        indices = watching_indices(bridged.check_indices)
        rewind = GeneratorRewind(self.draws and bridged.check_indices)
        with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, _SavedOnDevice.unpack), \
                HostDraws.when(self.draws) as drawing, converting_dtypes(self.converts), \
                decomposing(self.faithful), indices:
            out = run_noting_nodes(bridged.flat, device_args, drawing.layouts if drawing is not None else None)
        in_range = indices.all_in_range()
        leaves, treespec = pytree.tree_flatten(out)
        if not set(bridged.written).intersection(bridged.device_positions):   # nothing of the caller's
            refuse_guarded_views(leaves, [k for k, leaf in enumerate(leaves) if _requires_grad(leaf)])
        counters.traces += 1
        after = dev.data_identities([device_args[p] for p in host_tensors])   # a write: new identity
        written = [p for p, was, now in zip(host_tensors, before, after) if was != now]
        dev.torch_xla().sync()
        if in_range is not None and not in_range.item():
            rewind.rewind()                       # the eager run draws them again
            raise IndexOutOfRange()               # before anything is written back
        # (host arguments only: a device argument written is the caller's own tensor, which has
        # the history eager gives it, and a rerun would write it twice)
        refuse_writes_that_require_grad([device_args[p] if p in written else None for p in range(len(args))],
                                        needs_grad)
        if written:
            bridged.host_inputs.write_back(written, args, device_args, bridged.silent)
            bridged.move_versions_as_eager(written, args, written)     # (one move per in-place op)
        # an output that is an argument itself is that argument, as in eager (not a copy of it:
        # the host's device copy, or a device argument's own-data copy, own_data_per_position)
        moved = {id(device_args[p]): args[p] for p, a in enumerate(args)
                 if isinstance(a, torch.Tensor) and device_args[p] is not a}
        leaves = [moved.get(id(leaf), leaf) for leaf in leaves]
        device_leaves = list(leaves)
        home = {}                             # id(device output) -> the caller's copy
        if bridged.host_outputs:              # each tensor once: one returned twice stays one
            for k, leaf in enumerate(leaves):
                if dev.is_xla(leaf) and k in bridged.host_outputs:
                    if id(leaf) not in home:
                        home[id(leaf)] = leaf.to("cpu")
                        layout = bridged.layouts.get(k)       # eager's strides, autograd kept
                        if layout is not None:
                            home[id(leaf)] = layout.of(home[id(leaf)], differentiable=True)
                    leaves[k] = home[id(leaf)]
            rebuild_output_views(leaves, bridged.output_views)
        guard_views_as_eager(leaves, bridged.creations)
        # each device output's tensor as the caller gets it (one rebuilt as a view of another
        # output replaced its own copy: a write reaches that view, and its base)
        returned = {}
        for k, device in enumerate(device_leaves):
            if id(device) in home:
                returned.setdefault(id(device), leaves[k])
        callers = {key: (tensor, "an argument") for key, tensor in moved.items()}
        callers.update((key, (tensor, "an output")) for key, tensor in returned.items())
        by_storage = _outputs_sharing_versions(device_leaves, returned) if saved else {}
        for handle in saved:                 # eager saved the caller's tensor: watch it
            caller = callers.get(id(handle.tensor))
            base = handle.tensor._base
            if caller is None and base is not None:   # a view of it (linear saves weight.t()):
                caller = callers.get(id(base))        # eager's shares the caller's version
            if caller is None:               # an output viewing or detaching it
                output = _output_moving_version(handle.tensor, by_storage)
                caller = None if output is None else (output, "an output")
            if caller is not None:
                handle.watch = (caller[0], _version(caller[0]), caller[1])
        return pytree.tree_unflatten(leaves, treespec)
