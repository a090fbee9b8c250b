"""Side effects on the caller's Python objects, replayed after the graph runs.

While tracing, a list or dict read from the frame may be mutated (``xs.append(y)``), an
attribute of a real object assigned (``self.steps = n + 1``) or a global rebound.  The trace
applies the change to its own VariableTrackers (later reads in the trace see it), and records
it here; ``build_output`` then replays it on the REAL objects, re-read from their sources in
the new frame:

    list / dict from the caller   ->  real[:] = new items  /  real.clear(); real.update(...)
    list only appended to         ->  real.extend(appended)   (its items never read: caller_lists.py)
    attribute of a real object    ->  setattr(real, name, value)       (a module, a plain object)
                                      object.__setattr__(real, name, value)  (a plain object whose
                                      Python __setattr__ the trace inlined down to object's)
                                      object.__delattr__(real, name)    (``delattr``, ``del obj.x``;
                                      if present, after the trace's own store)
                                      an attribute deleted, then stored again, is deleted (if
                                      present) before its store: it moves to the end of the
                                      object's ``__dict__``, as in eager
    global of the frame           ->  func.__globals__[name] = value
    the frame's own closure cell  ->  func.__closure__[i].cell_contents = value
                                      (a resume function writing a cell of the frame it continues)

Aliasing: two sources naming the same list would make the trace wrong if only one of them is
known to change.  A caller's container the trace mutates is guarded to be a different object
from every other list (dict) of the caller it read, and refused if it is the same one now
(``aliasing_guards``).

Program order.  The replay happens after the whole graph ran.  If the graph raises at run time
(an index out of range), eager Python would have made exactly the side effects that precede
the raising op.  ``first_at`` (graph nodes recorded before the first side effect) lets the
capture decide whether that can be reproduced (see ``capture.graph_effects``).  A change to the
frame's own ``**kwargs`` dict does not count: CPython makes that dict anew for every call, so
only the frame sees it, unless the frame hands it on, which is a side effect of its own.
"""

from __future__ import annotations

import guards

from ..exc import Unsupported


class _Deleted:
    """What ``stored_attribute`` answers for an attribute the trace deleted."""

    def __repr__(self):
        return "DELETED"


DELETED = _Deleted()


class SideEffects:
    def __init__(self):
        self.containers_read: dict = {}    # source -> VT of every list/dict read from the frame
        self.aliases: dict = {}            # source -> the VT of that very list/dict, read first elsewhere
        self.mutated: dict = {}            # source -> VT mutated
        self.attribute_stores: dict = {}   # (id(object), name) -> (source, VT assigned or DELETED, raw)
        self.stored_objects: dict = {}     # id(object) -> the object, for those attribute_stores names
        self.deleted_after_store: set = set()   # keys of attributes stored, then deleted, by the trace
        self.reinserted: set = set()            # keys of attributes deleted, then stored again
        self.tensor_attributes: dict = {}  # id(example) -> (example, {name: VT}, made in the trace)
        self.global_stores: dict = {}      # name -> VT assigned
        self.cell_stores: dict = {}        # index in the frame's closure -> VT assigned
        self.stored_cells: set = set()     # their free variables' names and their cells' ids
        self.foreign_cells_read: set = set()   # names and ids of cells read through another function's __closure__
        self.foreign_readers: dict = {}    # such a cell's name -> ids of the trackers that read it
        self.foreign_cell_stores: dict = {}    # name -> (its tracker, VT assigned): nonlocal in a callee
        self.own_cells_read: set = set()   # names and ids of the frame's own closure cells read
        self.cell_trackers: dict = {}      # source of a function's closure cell -> its one RealCellVariable
        self.private: set = set()          # sources of what only the frame sees: its **kwargs dict
        self.position = None               # () -> graph nodes so far (set by the capture)
        self.first_at = None               # position of the first side effect, if any
        self.count = 0                     # side effects recorded so far (a vmap body must add none)

    def snapshot(self) -> int:
        return self.count

    def _note_position(self):
        self.count += 1
        if self.first_at is None and self.position is not None:
            self.first_at = self.position()

    # -- containers -----------------------------------------------------------------------
    def cached_container(self, source):
        return self.containers_read.get(source) or self.aliases.get(source)

    def container_of_object(self, value, real_values: dict):
        """(source, VT) of a list/dict already read that is ``value`` itself, or None: a second
        name for it shares that tracker (one object, one tracker; the names guarded to be one)."""
        for source, vt in self.containers_read.items():
            if real_values.get(source) is value:
                return source, vt
        return None

    def note_container(self, source, vt):
        self.containers_read[source] = vt

    def note_mutated_container(self, vt, what: str):
        if vt.source in self.private:   # (no one else sees it: an op raising after the change hides nothing)
            self.count += 1
        else:
            self._note_position()
        self.mutated[vt.source] = vt

    # -- attributes and globals ---------------------------------------------------------------
    def store_attribute(self, obj_vt, name: str, value_vt, raw: bool = False):
        """Keyed by the object itself: two sources naming one module see the same stored value
        (modules are identity-guarded; which plain objects are one is guarded too).  ``raw``:
        replayed with ``object.__setattr__`` / ``object.__delattr__``, never the class's own
        hook (the trace already inlined it); ``value_vt`` DELETED: a deletion."""
        if obj_vt.source is None:
            raise Unsupported(f"assignment to attribute {name!r} of an object made during the trace")
        self._store_attribute_of(obj_vt.source, obj_vt.value, name, value_vt, raw)

    def _store_attribute_of(self, source, obj, name: str, value_vt, raw: bool):
        self._note_position()
        key = (id(obj), name)
        self.stored_objects[key[0]] = obj
        earlier = self.attribute_stores.get(key)
        raw = raw or (earlier is not None and earlier[2])
        if value_vt is DELETED and earlier is not None and earlier[1] is not DELETED:
            # deleting what the trace itself stored: whether the real object had it before the
            # call was never read, and the replay has no store to undo, so it ends absent
            self.deleted_after_store.add(key)
        else:
            self.deleted_after_store.discard(key)
        if value_vt is not DELETED and earlier is not None and earlier[1] is DELETED:
            # stored after a deletion: the attribute now comes last in the object's __dict__,
            # after attributes stored in between, so its replay moves to the end too
            del self.attribute_stores[key]
            self.reinserted.add(key)
        self.attribute_stores[key] = (source, value_vt, raw)

    def store_tensor_attribute(self, example, name: str, value_vt, real_input=None):
        """``t.name = value`` on a tensor (a plain ``__dict__`` entry: ``mark_static_address``'s
        tag).  Known by the tensor's example, the one object every tracker of that tensor shares
        (an in-place op returns it).  A graph input's store replays on the real input
        (``real_input``: (source, tensor)); a tensor the graph makes gets it where its output is
        built (``templates.Templates``)."""
        _, stored, made = self.tensor_attributes.setdefault(id(example), (example, {}, real_input is None))
        stored[name] = value_vt
        if real_input is not None:
            self._store_attribute_of(*real_input, name, value_vt, raw=False)
        else:
            self._note_position()

    def tensor_attribute(self, example, name: str):
        """The value the trace stored as the tensor's attribute ``name``, or None."""
        entry = self.tensor_attributes.get(id(example))
        return entry[1].get(name) if entry is not None else None

    def made_tensor_attributes(self, example) -> dict:
        """{name: VT} stored on a tensor the graph makes (empty for graph inputs)."""
        entry = self.tensor_attributes.get(id(example))
        return entry[1] if entry is not None and entry[2] else {}

    def stored_attribute(self, obj_vt, name: str):
        """The value the trace stored (DELETED after a deletion), or None."""
        return self.stored_attribute_of(obj_vt.value, name)

    def stored_attribute_of(self, obj, name: str):
        entry = self.attribute_stores.get((id(obj), name))
        return entry[1] if entry is not None else None

    def has_stored_attributes_in(self, namespace: dict) -> bool:
        """Whether the trace assigned attributes of the object whose ``__dict__`` this is."""
        from .variables.base import instance_dict

        return any(instance_dict(obj) is namespace for obj in self.stored_objects.values())

    def mutated_dict(self, instance_dict, real_values: dict) -> bool:
        """Whether the trace wrote ``instance_dict`` (an object's ``__dict__``, or None for an
        object without one) as a container."""
        return type(instance_dict) is dict and any(real_values.get(source) is instance_dict for source in self.mutated)

    def has_stored_attributes(self, obj_vt) -> bool:
        return any(key[0] == id(obj_vt.value) for key in self.attribute_stores)

    def store_global(self, name: str, value_vt):
        self._note_position()
        self.global_stores[name] = value_vt

    def store_cell(self, index: int, cell, name: str, value_vt):
        """``x = v`` / ``nonlocal x`` on a free variable of the frame itself.  The cell is known
        by its place in the frame's closure only: the same cell reached through another
        function's ``__closure__`` would be a second tracker that misses the store.  Which cells
        are one object is not guarded, but a function shares a cell of the frame only when its
        code is nested in the frame's (a closure made before a break, handed over), and then it
        names the cell as the frame does: a trace that stores a cell and reads another
        function's cell of that name (or that very cell now) is refused."""
        if name in self.foreign_cells_read or id(cell) in self.foreign_cells_read:
            raise Unsupported(f"assignment to the closure variable {name!r} of the frame in a trace that also reads "
                              "another function's closure cell of that name (they may be the same cell)")
        self._note_position()
        self.cell_stores[index] = value_vt
        self.stored_cells.update((name, id(cell)))

    def note_foreign_cell_read(self, cell, name: str, tracker=None):
        if name in self.stored_cells or id(cell) in self.stored_cells:
            raise Unsupported(f"a closure cell {name!r} of another function read after the frame assigned its own "
                              "closure variable of that name (they may be the same cell)")
        stored = self.foreign_cell_stores.get(name)
        if stored is not None and stored[0] is not tracker:
            raise Unsupported(f"a closure cell {name!r} read through one function after the trace assigned it "
                              "through another (they may be the same cell)")
        self.foreign_cells_read.update((name, id(cell)))
        self.foreign_readers.setdefault(name, set()).add(id(tracker))

    def note_own_cell_read(self, cell, name: str):
        """A read of the frame's own closure cell: refused after a store through another
        function's ``__closure__`` of that name (the same cell, maybe: the read would miss it)."""
        if name in self.foreign_cell_stores or any(t.cell is cell for t, _ in self.foreign_cell_stores.values()):
            raise Unsupported(f"the frame's closure variable {name!r} read after the trace assigned a closure cell "
                              "of that name through another function (they may be the same cell)")
        self.own_cells_read.update((name, id(cell)))

    def store_foreign_cell(self, tracker, value_vt):
        """``nonlocal x; x = v`` in a function the trace inlined whose cell belongs to a function
        defined outside the trace (a counter of a decorator, a closure's state): replayed after
        the graph into the cell its source reads this call (``fn.__closure__[i]``).  Only one
        tracker may stand for cells of that name in the trace: two functions reaching the same
        cell would otherwise each keep their own value of it."""
        name = tracker.name
        if name in self.stored_cells or id(tracker.cell) in self.stored_cells or \
                name in self.own_cells_read or id(tracker.cell) in self.own_cells_read:
            raise Unsupported(f"assignment to the closure variable {name!r} of another function in a trace that "
                              "also reads or assigns the frame's own of that name (they may be the same cell)")
        others = self.foreign_readers.get(name, set()) - {id(tracker)}
        stored = self.foreign_cell_stores.get(name)
        if others or (stored is not None and stored[0] is not tracker):
            raise Unsupported(f"assignment to the closure variable {name!r} that the trace also reaches through "
                              "another function (they may be the same cell)")
        self._note_position()
        self.foreign_cell_stores[name] = (tracker, value_vt)

    def stored_global(self, name: str):
        return self.global_stores.get(name)

    # -- the replay plan --------------------------------------------------------------------------
    def aliasing_guards(self, real_values: dict) -> list:
        """A mutated caller's list (or dict) and every other list (dict) of the caller the trace
        read: the trace keeps one tracker per source, so a change through one must not be
        visible through another.  Distinct now: guarded distinct (``alias_match``), so a later
        call that passes one list twice misses.  The same object now: refused.  (Plain objects
        need nothing here: their attribute stores are keyed by the object itself, and which of
        them are one object is guarded by ``OutputGraph.identity_guards``.)"""
        result = []
        for source, vt in self.mutated.items():
            kind = vt.python_type()
            others = [s for s, other in self.containers_read.items() if s != source and other.python_type() is kind]
            for other in others:
                if real_values.get(source) is real_values.get(other):
                    raise Unsupported(f"{source.name()} is mutated and is also read as {other.name()} (the same "
                                      f"{kind.__name__} under two names)")
            if others:
                result.append(guards.alias_match(source, tuple((other, False) for other in others)))
        return result
