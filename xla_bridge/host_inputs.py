"""Host arguments to device arguments, on every call.

A host (CPU) tensor can change without its ``_version`` moving: a data loader refilling its
buffer through numpy, ``m.weight.data.fill_(...)``, ``x.data.copy_(...)``, a weight written
through ``m.weight.detach().numpy()``. No check the bridge could afford per call (identity,
version, data pointer) sees such a write, so a device copy of host data is never trusted
across calls: every host tensor argument, data input or weight, is copied to the device on
every call, in one batched transfer (a tensor in several positions once). Device tensors are
used as they are: a model kept on the XLA device (``model.to(xla_device)``) is the fast path,
where only the data inputs move. (Cost: one host->device copy of every host weight per call;
resnet18 on the CPU runtime, ~45 MB, see ``bench/README.md``.)

The opt-in ``cache_host_weights`` (``xla_bridge.config``) keeps the copy of a *weight* position
while the same tensor object comes back with the same ``_version`` (an in-place op bumps it, a
replaced weight is another object), checked in C-level passes (``map(operator.is_, ...)``,
``map(attrgetter("_version"), ...)``). Its risk, stated in ``config``: a write that does not
bump the version is served stale. Data inputs are never cached.

A call also says whether any host argument has another shape or dtype than last call
(compared every call, C-level), so the device program can skip its shape-keyed lookup.

Tensors that share memory matter only when the graph writes one of them in place (the graph
was traced as if they were distinct): ``aliased(written, ...)`` finds that case so the call can
run eagerly instead; it reads every argument's memory anew, as a storage can change behind an
unchanged tensor object too.
"""

import itertools
import operator

import torch

from . import device as dev

_version_of = operator.attrgetter("_version")
_shape_of = operator.attrgetter("shape")
_dtype_of = operator.attrgetter("dtype")


def picker(indices):
    """``picker(indices)(sequence)`` -> tuple of the items at ``indices`` (one C call)."""
    if len(indices) > 1:
        return operator.itemgetter(*indices)
    if indices:
        index = indices[0]
        return lambda sequence: (sequence[index],)
    return lambda sequence: ()


def signature(tensor: torch.Tensor) -> tuple:
    """What a compiled graph depends on: shape and dtype (copies on the device are dense)."""
    return tensor.shape, tensor.dtype


def transfer(tensors: list) -> list:
    """Device copies of host ``tensors`` in one batched transfer; a repeated tensor once."""
    if not tensors:
        return []
    ids = list(map(id, tensors))
    if len(set(ids)) == len(ids):
        return dev.to_device(tensors)
    unique = dict(zip(ids, tensors))
    copy_of = dict(zip(unique, dev.to_device(list(unique.values()))))
    return [copy_of[i] for i in ids]


class HostInputs:
    """``device_args, shapes_changed = host_inputs(args)`` for one graph's argument list.

    Arguments at ``host_positions`` are replaced by device copies: fresh ones every call,
    except at ``cached_positions`` (opt-in weights, see the module docstring). The others
    (device tensors, Python values) are passed as they are.
    """

    def __init__(self, argument_count: int, host_positions: tuple, cached_positions=()):
        cached = set(cached_positions).intersection(host_positions)
        self.fresh_positions = tuple(p for p in host_positions if p not in cached)
        self.cached_positions = tuple(p for p in host_positions if p in cached)
        self.host_positions = self.fresh_positions + self.cached_positions
        self.read_fresh = picker(self.fresh_positions)
        self.read_cached = picker(self.cached_positions)
        # device_args = pick((*args, *fresh copies, *cached copies)): a host position takes
        # its copy's index instead
        order = list(range(argument_count))
        for slot, position in enumerate(self.host_positions):
            order[position] = argument_count + slot
        self.assemble = picker(order)
        self.shapes = self.dtypes = None      # of the fresh arguments, last call
        slots = len(self.cached_positions)
        self.slot_of_position = {p: k for k, p in enumerate(self.cached_positions)}
        self.objects = [None] * slots         # the host tensor each cached copy was made from
        self.versions = [-1] * slots          # (kept alive, so its id is never reused), its
        self.copies = [None] * slots          # version, the copy and its signature
        self.signatures = [None] * slots
        self.write_backs = 0                  # calls that wrote the caller's tensors, so far

    def __call__(self, args):
        """(the device arguments, whether some host argument has another shape or dtype than
        on the last call)."""
        fresh = self.read_fresh(args)
        shapes, dtypes = list(map(_shape_of, fresh)), list(map(_dtype_of, fresh))
        changed = shapes != self.shapes or dtypes != self.dtypes
        self.shapes, self.dtypes = shapes, dtypes
        moving, stale = list(fresh), ()
        if self.cached_positions:
            cached = self.read_cached(args)
            versions = list(map(_version_of, cached))
            if versions != self.versions or not all(map(operator.is_, cached, self.objects)):
                stale = list(itertools.compress(range(len(cached)), map(
                    operator.or_, map(operator.is_not, cached, self.objects),
                    map(operator.ne, versions, self.versions))))
                moving += [cached[s] for s in stale]
        copies = transfer(moving)
        if stale:
            for slot, copy in zip(stale, copies[len(fresh):]):
                tensor = cached[slot]
                self.objects[slot], self.versions[slot], self.copies[slot] = \
                    tensor, versions[slot], copy
                new = signature(tensor)
                changed = changed or new != self.signatures[slot]
                self.signatures[slot] = new
            del copies[len(fresh):]
        return list(self.assemble((*args, *copies, *self.copies))), changed

    def forget_cached(self) -> None:
        """Make every cached copy again on the next call (a run that was abandoned may have
        written to them: the trivial path's lazy in-place updates)."""
        self.versions = [-1] * len(self.versions)

    def aliased(self, written, args, device_positions) -> bool:
        """Does an argument written in place share memory with another tensor argument?"""
        positions = self.host_positions + tuple(device_positions)
        keys = [memory_key(args[p]) for p in positions]
        if len(set(keys)) == len(keys):
            return False
        groups = {}
        for position, key in zip(positions, keys):
            groups.setdefault(key, []).append(position)
        written = set(written)
        return any(len(group) > 1 and written.intersection(group) for group in groups.values())

    def write_back(self, positions, args, device_args, silent=frozenset()) -> None:
        """Copy in-place results to the caller's host tensors (one batched transfer); a cached
        weight's device copy already holds the new value, so its slot stays valid.  ``silent``
        positions are written as eager writes them (batch norm's running statistics): through
        ``.data``, whose version counter is its own, so theirs does not move."""
        self.write_backs += 1             # (a call that then fails cannot be re-run eagerly)
        values = dev.to_host([device_args[p] for p in positions])
        with torch.no_grad():
            for position, value in zip(positions, values):
                target = args[position]
                torch.Tensor.copy_(torch.Tensor.data.__get__(target) if position in silent else target, value)
        for position in positions:
            slot = self.slot_of_position.get(position)
            if slot is not None and args[position] is self.objects[slot]:
                self.versions[slot] = args[position]._version


def memory_key(tensor: torch.Tensor):
    """Host tensors: their storage; device tensors: the base they view (or themselves)."""
    if dev.is_xla(tensor):
        while tensor._base is not None:
            tensor = tensor._base
        return ("xla", id(tensor))
    try:
        storage = torch.Tensor.untyped_storage(tensor)
    except (RuntimeError, NotImplementedError):    # no plain storage (sparse, ...): itself
        return ("opaque", id(tensor))
    if storage.nbytes() == 0:
        return ("empty", id(tensor))
    return ("host", storage.data_ptr())
