"""Which nn.Modules a compiled entry may share: guarded by type and state instead of identity.

A frame like ``Block.forward(self, x)`` compiled by itself (its parent fell back or broke, say
in a loop over the layers) would guard ``L['self']`` by identity, so twelve identical layers
would compile twelve entries and run into ``cache_size_limit``.  Yet such an entry relies on
nothing but what it re-reads on every call: the layer's parameters and buffers are graph inputs
read from their sources, its constants are guarded by value, and its state (``training``, hooks)
and the structure the trace walked (the keys of the dicts it read, where each attribute lives)
are guarded anyway.  So, as torch.compile does with ``inline_inbuilt_nn_modules``:

    a module reached from a frame ARGUMENT (its source's root is a ``LocalSource``), once a
    second object of its type came to that place of that code, and every module below a shared
    one, is guarded by its exact type and state (``type_match`` + ``module_state_match``), not
    by identity.

The first module seen at a place keeps its identity guard (``may_share``): a model called
alone keeps the native guard's pinned fast path (resnet18: ~3 us per call; guarded by type
from its first trace, its guard took the generated Python path, ~50 us), and N identical layers compile two entries, the first
layer's and one shared by all (it is newer, so tried first).

The tracer decides, per trace, whether type and state are enough, and *pins* a shared module
(adds the identity guard after all) when the trace relied on more:

  - a value read from it (or from below it, before the next module down) that is not a tensor
    (a graph input), a constant guarded by value, a function / class / C callable guarded by
    identity, or a module under this same rule: an arbitrary object, a list or dict, a bound
    method or a closure stored on the instance (``builder.fully_guarded``);
  - an attribute stored on it (``translator.store_attr``);
  - an identity test against a value without a source (``operators._module_identity``; between
    two values read from the frame the relation is guarded instead, ``alias_match``).

The walk of ``parameters()`` (each module once) guards which modules are one object
(``nn_module._members``).  A module returned or handed over at a graph break is re-read from its
source (``templates.Templates``): this call's module.  Modules read from globals, closures or
defaults keep their identity guard.  Switch: ``config.share_module_entries``.
"""

from __future__ import annotations

import weakref

import guards as G
from .. import config

# code -> {source: weak reference to the first module seen there} (``may_share``)
_first_seen: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def forget() -> None:
    """``minidynamo.reset()``: no module has been seen anywhere."""
    _first_seen.clear()


def sharing_of(output) -> "ModuleSharing":
    """This trace's record (made on first use)."""
    found = getattr(output, "module_sharing", None)
    if found is None:
        found = output.module_sharing = ModuleSharing()
    return found


def root_of(source):
    while source.base is not None:
        source = source.base
    return source


class ModuleSharing:
    def __init__(self):
        self.shared: dict = {}      # source -> module guarded by type and state
        self.pinned: dict = {}      # source -> why it is guarded by identity after all
        self.others: dict = {}      # source -> module guarded by identity from the start

    def may_share(self, code, source, module) -> bool:
        """Share ``module`` read from ``source`` in a frame of ``code``?  Below a shared module:
        yes.  At the top (an argument, or reached from one through no module): once a second
        object of the same type has come to this place of this code; the first one keeps its
        identity guard (and with it the guard's native pinned fast path: one model called
        alone never pays for sharing)."""
        if not config.share_module_entries or not isinstance(root_of(source), G.LocalSource):
            return False
        if self.owner(source) is not None:
            return True
        seen = _first_seen.setdefault(code, {})
        first = seen.get(source)
        first = first() if first is not None else None
        if first is None:
            seen[source] = weakref.ref(module)
            return False
        return first is not module and type(first) is type(module)

    def add(self, source, module, shared: bool) -> None:
        (self.shared if shared else self.others)[source] = module

    def owner(self, source):
        """The nearest shared module ``source`` was read from (or None)."""
        source = source.base
        while source is not None:
            if source in self.shared:
                return source
            source = source.base
        return None

    def note_read(self, source, value, fully_guarded: bool) -> None:
        """A value read from ``source``: pin its module unless the value's guard pins all the
        trace may rely on (``builder.fully_guarded``)."""
        owner = self.owner(source)
        if owner is not None and owner not in self.pinned and not fully_guarded:
            self.pin(owner, f"{source.name()} is a {type(value).__name__}")

    def pin(self, source, why: str) -> None:
        if source in self.shared:
            self.pinned.setdefault(source, why)

    def finish(self, output) -> None:
        """Identity guards for the pinned modules."""
        for source, module in self.shared.items():
            if source in self.pinned:
                output.add_guard(G.id_match(source, module))

