"""Host arguments to device arguments, once per call, doing work only for what changed.

A graph captured by minidynamo takes every weight as an argument: resnet18 has ~100 of them,
BERT ~200, and on a replay nearly all are the very tensors of the previous call. ``HostInputs``
keeps one device copy per host argument and answers a call with C-level passes over the
arguments (``map(operator.is_, ...)``, ``map(attrgetter("_version"), ...)``, one
``itemgetter``): no Python statement runs per unchanged weight.

A copy is reused while the same tensor object comes back with the same ``_version``: an
in-place update bumps the version and a replaced weight is another object, so both are seen
(a change made without bumping the version, through ``.data`` or numpy, is not). Every shape
change made in place bumps the version too, so an argument whose copy is reused also kept its
shape and dtype: ``shapes_changed`` tells the device program whether it must look at shapes.

The same tensor object in two positions gets one device copy. Tensors that share memory matter
only when the graph writes one of them in place (the graph was traced as if they were distinct):
``aliased(written, ...)`` finds that case so the call can run eagerly instead.
"""

import itertools
import operator

import torch

from . import device as dev

_version_of = operator.attrgetter("_version")


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


class HostInputs:
    """``device_args = host_inputs(args)`` for one graph's argument list.

    Arguments at ``host_positions`` are replaced by their device copies; the others (device
    tensors, Python values) are passed as they are.
    """

    def __init__(self, argument_count: int, host_positions: tuple):
        self.host_positions = tuple(host_positions)
        self.slot_of_position = {p: k for k, p in enumerate(self.host_positions)}
        self.read_host = picker(self.host_positions)
        # device_args = pick((*args, *copies)): a host position takes its copy's index instead
        order = list(range(argument_count))
        for slot, position in enumerate(self.host_positions):
            order[position] = argument_count + slot
        self.assemble = picker(order)
        slots = len(self.host_positions)
        self.objects = [None] * slots         # the host tensor each copy was made from (kept
        self.versions = [-1] * slots          # alive, so its id is never reused) and its version
        self.copies = [None] * slots
        self.signatures = [None] * slots
        self.memory = [None] * slots          # what memory each slot's host tensor lives in
        self.slot_of_id = {}                  # id(host tensor) -> a slot holding its copy
        self.refreshed = self.shapes_changed = True
        self.last_stale = []                  # the slots the last refresh copied

    def __call__(self, args):
        """The device arguments; ``refreshed`` / ``shapes_changed`` then say whether some host
        argument was another tensor (or version) than last call / had another shape or dtype."""
        host = self.read_host(args)
        versions = list(map(_version_of, host))
        self.refreshed = self.shapes_changed = False
        if versions != self.versions or not all(map(operator.is_, host, self.objects)):
            self.refreshed = True
            self.shapes_changed = self._refresh(host, versions)
        return list(self.assemble((*args, *self.copies)))

    def _refresh(self, host, versions) -> bool:
        """Copy the stale slots; True if a slot's signature changed. The slots that were stale
        last time (the caller's fresh inputs, usually) are checked first, one by one; the C-level
        comparison then says whether any other slot (a weight) needs a scan."""
        objects, known = self.objects, self.versions
        stale = [s for s in self.last_stale if host[s] is not objects[s] or versions[s] != known[s]]
        changed = self._copy(stale, host, versions)
        if versions != known or not all(map(operator.is_, host, objects)):
            more = list(itertools.compress(range(len(host)), map(
                operator.or_, map(operator.is_not, host, objects), map(operator.ne, versions, known))))
            changed = self._copy(more, host, versions) or changed
            stale += more
        self.last_stale = stale
        return changed

    def _copy(self, stale, host, versions) -> bool:
        """Fill ``stale`` slots (sharing a copy with a slot holding the same tensor, else one
        batched transfer); True if one of them got another shape or dtype."""
        missing = {}                          # id -> (tensor, its stale slots): one copy each
        for slot in stale:
            tensor = host[slot]
            shared = self.slot_of_id.get(id(tensor))
            if shared is not None and shared not in stale and self.objects[shared] is tensor \
                    and self.versions[shared] == versions[slot]:
                self._fill(slot, tensor, versions[slot], self.copies[shared])
            else:
                missing.setdefault(id(tensor), (tensor, []))[1].append(slot)
        if missing:
            copies = dev.to_device([tensor for tensor, _ in missing.values()])
            for (tensor, slots), copy in zip(missing.values(), copies):
                for slot in slots:
                    self._fill(slot, tensor, versions[slot], copy)
        changed = False
        for slot in stale:
            new = signature(host[slot])
            changed = changed or new != self.signatures[slot]
            self.signatures[slot] = new
        return changed

    def _fill(self, slot, tensor, version, copy) -> None:
        old = self.objects[slot]
        if old is not None and self.slot_of_id.get(id(old)) == slot:
            del self.slot_of_id[id(old)]
        self.objects[slot], self.versions[slot], self.copies[slot] = tensor, version, copy
        self.memory[slot] = memory_key(tensor)
        self.slot_of_id[id(tensor)] = slot

    def aliased(self, written, args, device_positions) -> bool:
        """Does an argument written in place share memory with another tensor argument?
        (Host slots' memory keys are kept with their copies; device ones are read now.)"""
        positions = self.host_positions + tuple(device_positions)
        keys = self.memory + [memory_key(args[p]) for p in device_positions]
        if len(set(keys)) == len(keys):
            return False
        groups = {}
        for position, key in zip(positions, keys):
            groups.setdefault(key, []).append(position)
        written = set(written)
        return any(len(group) > 1 and written.intersection(group) for group in groups.values())

    def write_back(self, positions, args, device_args) -> None:
        """Copy in-place results to the caller's host tensors (one batched transfer); their
        device copies already hold the new values, so the slots stay valid."""
        values = dev.to_host([device_args[p] for p in positions])
        with torch.no_grad():
            for position, value in zip(positions, values):
                args[position].copy_(value)
        for position in positions:
            slot = self.slot_of_position[position]
            if args[position] is self.objects[slot]:
                self.versions[slot] = args[position]._version


def memory_key(tensor: torch.Tensor):
    """Host tensors: their storage; device tensors: the base they view (or themselves)."""
    if dev.is_xla(tensor):
        while tensor._base is not None:
            tensor = tensor._base
        return ("xla", id(tensor))
    try:
        storage = tensor.untyped_storage()
    except (RuntimeError, NotImplementedError):    # no plain storage (sparse, ...): itself
        return ("opaque", id(tensor))
    if storage.nbytes() == 0:
        return ("empty", id(tensor))
    return ("host", storage.data_ptr())
