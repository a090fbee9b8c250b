"""Outputs that share memory with the inputs, found once at compile time on meta tensors.

Eager PyTorch may return a view of an argument (``x.t()``, ``x[0]``, ``x.view(-1)``) or the
argument itself (``x.contiguous()``): a later write through one is seen through the other. The
device returns fresh tensors, so the host side rebuilds such outputs as views of the caller's
own tensor (``as_strided`` with the size, stride and offset eager would give), after any
in-place update has been written back.

``analyse_memory(program, args)`` runs the graph on meta tensors shaped and strided like the
arguments (no data, no compute): it maps each output leaf sharing an argument's memory to a
``HostView`` and lists the arguments the graph writes in place (their ``_version`` moved), for
every kind of device program alike. An output viewing a device argument is listed apart
(``device_views``: made again by its own view ops, ``device_views.py``). Aliasing the bridge
cannot rebuild raises ``NotOneGraph`` (the graph then runs eagerly, with the reason): outputs
sharing memory that no argument owns where none of them holds the elements of the others
(``y.chunk(2)``: the device returns each alone, eager's storage holds both). Where one does
(``y, y[:, 0]``: Hugging Face's pooled outputs; ``logits.t(), logits``: CLIP), the others are
rebuilt as views of it: on the host with ``as_strided`` of it laid out as eager's storage
(``OutputView``), on the device by their own view ops (``device_views.py``). So does a graph that changes an argument's metadata in place (shape, strides, storage offset,
dtype, ``requires_grad`` or its storage: ``x.t_()``, ``x.set_(y)``, ``x.unsqueeze_(0)``,
``x.resize_(n)``, ``x.requires_grad_()``; ``InputMetadataMutated``): the device hands back
data only. An output eager lays out non-compactly (a view of a tensor made inside the graph,
``(x * 2).t()``) gets eager's strides and storage offset on the host (``EagerLayout``).
"""

from dataclasses import dataclass
from typing import Optional

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from . import device as dev
from .guarded_views import guarded_view_kinds
from .lazy_graph import NotOneGraph


@dataclass(frozen=True, eq=False)
class HostView:
    """Output = ``args[position]`` viewed with ``size``/``stride`` at ``offset`` past its own
    storage offset; valid while the argument has ``base_size`` and ``base_stride``."""
    position: int
    size: tuple
    stride: tuple
    offset: int
    base_size: tuple
    base_stride: tuple
    itself: bool = False        # the argument object itself (``x.contiguous()``), not a view of it
    # Eager's view was written through after it was made, under no_grad, of a tensor that
    # requires grad: autograd then refuses to rebase it, and its ``.grad_fn`` (``.is_leaf``,
    # ``.backward()``) raises. Made before the write-back, the host's view raises the same.
    made_before_writes: bool = False
    # The view's own dtype where it reinterprets the argument's bytes (``x.view(torch.int32)``);
    # None: the argument's. ``offset`` is then in bytes (elements of two sizes meet there).
    dtype: torch.dtype = None
    # The view's lazy conjugate / negative bits (``x.conj()``, ``x.conj().imag``,
    # ``torch._neg_view(x)``): as_strided keeps the argument's, which has none (an argument
    # with one runs eagerly: ``device.HostOnlyArgument``).
    conj: bool = False
    neg: bool = False
    # Eager's view is cut from autograd (``x.detach()``, ``x.data``, a view made under no_grad)
    # while the argument requires grad: rebuilt from the argument detached, so no gradient flows
    # back through it (as_strided of the argument itself would carry one).
    detached: bool = False
    # Eager's output is a view (``_base`` set); ``x.detach()`` shares the memory and is not one.
    view: bool = True
    # Not a view, and with a version counter of its own (``x.data``; ``x.detach()`` shares x's).
    own_version: bool = False

    def fits(self, base: torch.Tensor) -> bool:
        return base.shape == self.base_size and torch.Tensor.stride(base) == self.base_stride

    def of(self, base: torch.Tensor) -> torch.Tensor:
        if self.itself:
            return base
        if not self.view and (self.detached or not base.requires_grad) and self._whole(base):
            # ``x.detach()``, ``x.data``: the memory, no view (``detach_`` works)
            return torch.Tensor.data.__get__(base) if self.own_version else torch.Tensor.detach(base)
        if self.detached:
            base = torch.Tensor.detach(base)
        view = self._strided(base)
        if self.conj:
            view = torch.Tensor.conj(view)
        return torch._neg_view(view) if self.neg else view

    def _whole(self, base: torch.Tensor) -> bool:
        return (self.dtype is None and not self.conj and not self.neg and self.offset == 0
                and self.size == tuple(base.shape) and self.stride == torch.Tensor.stride(base))

    def _strided(self, base: torch.Tensor) -> torch.Tensor:
        if self.dtype is None:
            return torch.Tensor.as_strided(base, self.size, self.stride,
                                           torch.Tensor.storage_offset(base) + self.offset)
        # the argument's whole storage as one row, reinterpreted (still a view of the argument)
        element, item = base.element_size(), self.dtype.itemsize
        row = torch.Tensor.as_strided(base, (base.untyped_storage().nbytes() // element,), (1,), 0)
        start = torch.Tensor.storage_offset(base) * element + self.offset
        return torch.Tensor.as_strided(torch.Tensor.view(row, self.dtype), self.size, self.stride,
                                       start // item)


def meta_like(value):
    """A meta tensor (no data) with ``value``'s shape, strides, dtype and ``requires_grad``."""
    if not isinstance(value, torch.Tensor):
        return value
    meta = torch.empty_strided(value.shape, torch.Tensor.stride(value), dtype=value.dtype, device="meta")
    return meta.requires_grad_(value.requires_grad)


class InputMetadataMutated(NotOneGraph):
    """The graph changes an argument's metadata in place (``x.t_()``, ``x.unsqueeze_(0)``,
    ``x.resize_(...)``, ``x.as_strided_(...)``, ``x.requires_grad_()``, ...). The device
    returns updated *data* only, written back into the caller's tensor as it is, so such a
    graph runs eagerly (with this reason) instead of losing the change."""


def metadata(tensor: torch.Tensor) -> tuple:
    """What an in-place op can change about a tensor besides its data."""
    return (tuple(tensor.shape), torch.Tensor.stride(tensor), torch.Tensor.storage_offset(tensor), tensor.dtype,
            tensor.requires_grad, _storage(tensor))


_FIELDS = ("shape", "stride", "storage offset", "dtype", "requires_grad", "storage")


def check_metadata_kept(before: list, after: list) -> None:
    """Raise InputMetadataMutated if an argument's ``metadata`` differs after the graph ran
    (``before``/``after``: per argument, its metadata or None for a non-tensor)."""
    for position, (old, new) in enumerate(zip(before, after)):
        if old is None or old == new:
            continue
        changes = ", ".join("storage replaced (set_)" if name == "storage" else
                            f"{name} {a!r} -> {b!r}"
                            for name, a, b in zip(_FIELDS, old, new) if a != b)
        raise InputMetadataMutated(f"the graph changes the metadata of argument {position} in "
                                   f"place ({changes}): the device writes back data only")


def _storage(tensor: torch.Tensor) -> int:
    return torch.Tensor.untyped_storage(tensor)._cdata


@dataclass(frozen=True)
class EagerLayout:
    """Where eager puts an output that is not a compact contiguous tensor: a view of a tensor
    made inside the graph (``(x * 2).t()``, ``y.relu().chunk(2)[1]``, ``t.expand(...)``) or an
    elementwise result that kept a permuted input's strides (``x.t() * 2``): ``size``/``stride``
    at ``offset`` in a storage of ``storage_numel`` elements. The device hands back a compact tensor; ``of`` lays its values
    out as eager would (one host copy), so strides, storage offset and ``view``-ability match."""
    size: tuple
    stride: tuple
    offset: int
    storage_numel: int
    # eager's lazy conjugate / negative bit (``(x * 2).conj()``): the device's values are
    # stored conjugated / negated under the bit, as eager's are
    conj: bool = False
    neg: bool = False
    view: bool = True     # eager's output is a view (``(x * 2).t()``); else a tensor of its own

    def of(self, value: torch.Tensor, differentiable: bool = False) -> torch.Tensor:
        """``value`` laid out as eager would; ``differentiable``: the copy is recorded by
        autograd (a result that carries a graph keeps it: its gradient flows to ``value``)."""
        if tuple(value.shape) != self.size or dev.is_xla(value):
            return value
        if self.view or self.offset or self.conj or self.neg:
            out = value.new_empty(self.storage_numel).as_strided(self.size, self.stride, self.offset)
        else:       # (not a view of a hidden buffer: eager's ``out.detach_()`` works on it)
            out = torch.empty_strided(self.size, self.stride, dtype=value.dtype, device=value.device)
        if self.conj:
            out = out.conj()
        if self.neg:
            out = torch._neg_view(out)
        target, source = out, value
        for dim, (size, stride) in enumerate(zip(self.size, self.stride)):
            if stride == 0 and size > 1:      # broadcast dims: write one slice (equal values)
                target, source = target.narrow(dim, 0, 1), source.narrow(dim, 0, 1)
        with torch.set_grad_enabled(differentiable and torch.is_grad_enabled()):
            target.copy_(source)
        return out

    @staticmethod
    def of_output(leaf: torch.Tensor):
        """The layout to rebuild for an output ``leaf`` (a meta tensor), or None when a compact
        contiguous tensor is what eager gives too, or the layout cannot be written safely."""
        storage_numel = leaf.untyped_storage().nbytes() // leaf.element_size()
        # (strides compared exactly: those of a size-1 dim are observable too, ``stride()``)
        bits = leaf.is_conj(), leaf.is_neg()
        if _compact_strides(leaf) and leaf.storage_offset() == 0 and storage_numel == leaf.numel() \
                and not any(bits):
            return None
        # Written through the dims that are not broadcast (stride 0): those must not overlap.
        kept = [dim for dim, stride in enumerate(leaf.stride()) if stride != 0]
        if may_overlap([leaf.shape[d] for d in kept], [leaf.stride(d) for d in kept]):
            return None
        return EagerLayout(tuple(leaf.shape), leaf.stride(), leaf.storage_offset(),
                           storage_numel, *bits, view=leaf._is_view())


def may_overlap(shape, stride) -> bool:
    """Whether two elements of a tensor laid out so may share memory (a broadcast dim, an
    ``as_strided`` whose rows overlap); False is certain, True may be a false alarm."""
    dims = sorted((step, size) for size, step in zip(shape, stride) if size > 1)
    reach = 0                                 # the farthest element the smaller dims reach
    for step, size in dims:
        if step <= reach:
            return True
        reach += (size - 1) * step
    return False


def _compact_strides(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` has exactly the strides ``torch.empty(shape)`` gives (size-1 dims
    included, where ``is_contiguous()`` looks past them)."""
    return tuple(tensor.stride()) == tuple(torch._prims_common.make_contiguous_strides_for(tensor.shape))


@dataclass(frozen=True)
class OutputView:
    """Output = output ``base`` (laid out as eager's storage) viewed with ``size``/``stride`` at
    storage offset ``offset``."""
    base: int
    size: tuple
    stride: tuple
    offset: int
    detached: bool = False      # cut from autograd where ``base`` is not (``h, h.detach()``)

    def of(self, base: torch.Tensor) -> torch.Tensor:
        if self.detached:
            base = torch.Tensor.detach(base)
        return torch.Tensor.as_strided(base, self.size, self.stride, self.offset)


@dataclass(frozen=True)
class MemoryPlan:
    views: dict        # {output leaf index: HostView}
    written: tuple     # argument positions the graph updates in place
    layouts: dict = None   # {output leaf index: EagerLayout}: outputs laid out non-compactly
    output_views: dict = None   # {output leaf index: OutputView}: views of an earlier output
    device_views: tuple = ()    # output leaves viewing a device argument (device_views.py)
    leaves: list = None         # the output leaves of the meta run
    creations: dict = None      # {output leaf index: CreationMeta}: views autograd guards
    bumps: dict = None          # {written position: how far eager moves its version counter}
    quiet: frozenset = frozenset()   # written positions whose version counter does not move
    own_versions: frozenset = frozenset()   # output leaves made through ``.data``


def rebuild_output_views(out: list, output_views: dict) -> None:
    """Replace each output that eager returns as a view of an earlier one by that view."""
    for k, view in output_views.items():
        out[k] = view.of(out[view.base])


_MAX_CHECKED = 1 << 26        # elements of a storage whose coverage is checked element by element


def _fills_its_storage(tensor: torch.Tensor) -> bool:
    """Contiguous from the start of a storage holding nothing else: what the device returns."""
    return tensor.is_contiguous() and tensor.storage_offset() == 0 and \
        tensor.untyped_storage().nbytes() == tensor.numel() * tensor.element_size()


def _output_view(leaf, base, base_k, base_laid_out, detached=False) -> "OutputView | None":
    """``leaf`` as a view of output ``base`` (same storage), or None when the host cannot
    rebuild it so: ``base`` does not come home with eager's storage, or ``leaf`` reads an
    element of that storage that ``base`` itself does not hold."""
    storage_numel = base.untyped_storage().nbytes() // base.element_size()
    if leaf.dtype != base.dtype or not (_fills_its_storage(base) or base_laid_out) \
            or storage_numel > _MAX_CHECKED:
        return None
    held = torch.zeros(storage_numel, dtype=torch.bool)
    held.as_strided(base.shape, base.stride(), base.storage_offset()).fill_(True)
    if not held.as_strided(leaf.shape, leaf.stride(), leaf.storage_offset()).all():
        return None
    return OutputView(base_k, tuple(leaf.shape), leaf.stride(), leaf.storage_offset(), detached=detached)


def _grad_fn_raises(view: torch.Tensor) -> bool:
    """Whether autograd refuses ``view.grad_fn`` (the meta run made it as eager makes it)."""
    try:
        view.grad_fn
    except RuntimeError:
        return True
    return False


def _output_nodes(program, count: int) -> Optional[list]:
    """The traced program's output leaves as graph nodes (values where a leaf is no node), or
    None when its graph does not say."""
    graph = getattr(getattr(program, "graph_module", program), "graph", None)
    outputs = [n for n in graph.nodes if n.op == "output"] if graph is not None else []
    nodes = pytree.tree_leaves(outputs[0].args[0]) if len(outputs) == 1 else None
    return nodes if nodes is not None and len(nodes) == count else None


def _example(node):
    example = node.meta.get("example_value") if isinstance(node, torch.fx.Node) else None
    return example if isinstance(example, torch.Tensor) else None


def _traced_requires_grad(program, count: int) -> list:
    """Per output leaf, whether the traced program's output requires grad (the tracer's example
    value: grad mode as the program ran it), or None where unknown.  (The meta run below is
    under no_grad: it cannot tell ``x[1:]`` from ``x.detach()``.)"""
    nodes = _output_nodes(program, count)
    if nodes is None:
        return [None] * count
    return [_example(node).requires_grad if _example(node) is not None else None for node in nodes]


def _own_version_leaves(program, count: int) -> frozenset:
    """Output leaves made through ``.data`` (or views of such): their version counter is their
    own, so a write to one moves none that eager's backward checks, though it reads that memory."""
    def through_data(node):
        while isinstance(node, torch.fx.Node) and node.op in ("call_function", "call_method") and node.args:
            if node.target is getattr and node.args[1:2] == ("data",):
                return True
            example = _example(node)
            if example is None or not example._is_view():
                return False
            node = node.args[0]
        return False
    return frozenset(k for k, node in enumerate(_output_nodes(program, count) or ()) if through_data(node))


def silently_written(gm) -> frozenset:
    """Positions of the arguments ``gm`` (a graph of minidynamo's tracer) writes only as eager's
    batch norm writes its running statistics: in place, moving no version counter (the op's
    schema does not say it writes them; the tracer marks such writes ``silent_writes``).  A
    backward that saved them does not see such a write, so the replay must not bump them."""
    def root(tensor):
        return id(tensor._base if tensor._base is not None else tensor)

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    position_of = {root(n.meta["example_value"]): i for i, n in enumerate(placeholders)
                   if isinstance(n.meta.get("example_value"), torch.Tensor)}
    loud, silent = set(), set()
    for node in gm.graph.nodes:
        quiet = {id(t) for t in node.meta.get("silent_writes") or ()}
        for written in node.meta.get("writes") or ():
            position = position_of.get(root(written))
            if position is not None:
                (silent if id(written) in quiet else loud).add(position)
    return frozenset(silent - loud)


def analyse_memory(program, args) -> MemoryPlan:
    """How the outputs of ``program(*args)`` and its in-place updates touch the arguments."""
    metas = [meta_like(a) for a in args]
    versions = [m._version if isinstance(m, torch.Tensor) else None for m in metas]
    before = [metadata(m) if isinstance(m, torch.Tensor) else None for m in metas]
    strided, stored = _StridedOps(), _WrittenStorages()
    try:
        with torch.no_grad(), strided, stored:
            out = program(*metas)
    except Exception as error:
        raise NotOneGraph(f"cannot tell whether outputs alias inputs: the graph does not run on "
                          f"meta tensors ({type(error).__name__}: {str(error)[:120]})") from None
    check_metadata_kept(before, [metadata(m) if isinstance(m, torch.Tensor) else None
                                 for m in metas])
    position_of_storage = {_storage(m): i for i, m in enumerate(metas)
                           if isinstance(m, torch.Tensor)}
    bumps = {i: m._version - v for i, (m, v) in enumerate(zip(metas, versions))
             if isinstance(m, torch.Tensor) and m._version != v}
    views, owner_of_storage, layouts, output_views, view_of_leaf = {}, {}, {}, {}, {}
    device_views = []
    leaves = pytree.tree_leaves(out)
    traced_grad = _traced_requires_grad(program, len(leaves))
    def ownership(k, leaf):               # the others are rebuilt as views of the owner
        return _fills_its_storage(leaf), traced_grad[k] is True
    for k, leaf in enumerate(leaves):     # each storage's owner: the first output filling it,
        if isinstance(leaf, torch.Tensor):  # else the first (``logits.t(), logits``: the second),
            storage = _storage(leaf)        # one requiring grad first (``h.data, h``: the second)
            owner = owner_of_storage.get(storage)
            if owner is None or ownership(k, leaf) > ownership(*owner):
                owner_of_storage[storage] = (k, leaf)
    for k, leaf in enumerate(leaves):
        if not isinstance(leaf, torch.Tensor):
            continue
        storage = _storage(leaf)
        position = position_of_storage.get(storage)
        if position is None:
            base_k, base = owner_of_storage[storage]
            if base is not leaf:
                view = _output_view(leaf, base, base_k, base_k in layouts,
                                    detached=traced_grad[base_k] is True and traced_grad[k] is False)
                if traced_grad[k] is True and traced_grad[base_k] is not True:
                    view = None           # (a view of what has no history would have none)
                if view is None:
                    raise NotOneGraph("two outputs share memory (one is a view of the other): "
                                      "the device would return them as separate tensors")
                output_views[k] = view
                continue
            layout = EagerLayout.of_output(leaf)
            if layout is not None:
                layouts[k] = layout
            continue
        base = metas[position]
        if dev.is_xla(args[position]):
            if leaf is base:
                continue                  # the device argument itself: the program returns it
            if _grad_fn_raises(leaf):
                raise NotOneGraph(f"an output is a view of device argument {position} that eager "
                                  "wrote through after making it: replaying would make it after")
            device_views.append(k)        # made again from the argument (device_views.py)
            continue
        if id(leaf) not in view_of_leaf:  # a view returned twice: one HostView, rebuilt once
            retyped = leaf.dtype != base.dtype
            if retyped and traced_grad[k]:
                # (``x.real``, ``view_as_real(x)`` of an argument requiring grad: the rebuild
                # reinterprets its bytes with ``view(dtype)``, which autograd does not follow)
                raise NotOneGraph(f"output {k} views argument {position} as another dtype and requires grad: "
                                  "its rebuild would carry no gradient back")
            offset = leaf.storage_offset() * leaf.element_size() - \
                base.storage_offset() * base.element_size() if retyped else \
                leaf.storage_offset() - base.storage_offset()
            view_of_leaf[id(leaf)] = HostView(
                position, tuple(leaf.shape), leaf.stride(), offset, tuple(base.shape), base.stride(),
                itself=leaf is base, made_before_writes=leaf is not base and _grad_fn_raises(leaf),
                dtype=leaf.dtype if retyped else None, conj=leaf.is_conj(), neg=leaf.is_neg(),
                detached=base.requires_grad and traced_grad[k] is False, view=leaf._is_view(),
                own_version=not leaf._is_view() and leaf is not base and not shares_version(leaf, base))
        views[k] = view_of_leaf[id(leaf)]
    # a write through ``x.data`` (a tensor of x's memory with a version counter of its own)
    # changes x without moving x's version: found by the memory written
    quiet = frozenset(position_of_storage[s] for s in stored.storages if s in position_of_storage) - set(bumps)
    written = tuple(sorted(set(bumps) | quiet))
    if strided.seen:
        _layouts_as_eager(program, args, views, layouts, output_views)
    creations = guarded_view_kinds(program, [meta_like(a) for a in args], leaves)
    return MemoryPlan(views, written, layouts, output_views, tuple(device_views), leaves, creations, bumps, quiet,
                      _own_version_leaves(program, len(leaves)))


# Ops that lay out their result the same way whatever their inputs' strides (a new row-major
# matrix: both kernels allocate it so): a transposed weight going into one tells nothing.
_LAYOUT_BLIND_OPS = frozenset(
    getattr(torch.ops.aten, name).default for name in ("mm", "addmm", "bmm", "baddbmm", "mv", "addmv", "dot"))


def shares_version(tensor, other) -> bool:
    """Does a write to ``tensor`` move ``other``'s version counter (one counter: ``detach()``, a
    view) or has it its own (``.data``)?  Asked by moving it, then setting it back."""
    before, other_before = tensor._version, other._version
    torch.autograd.graph.increment_version(tensor)
    shared = other._version != other_before
    torch._C._autograd._unsafe_set_version_counter((tensor,), (before,))
    return shared


class _WrittenStorages(TorchDispatchMode):
    """Notes the storage of every tensor an op writes (a ``Tensor(a!)`` argument of its schema)."""

    def __init__(self):
        super().__init__()
        self.storages = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        for i, argument in enumerate(func._schema.arguments):
            if argument.alias_info is None or not argument.alias_info.is_write:
                continue
            value = args[i] if i < len(args) and not argument.kwarg_only else kwargs.get(argument.name)
            if isinstance(value, torch.Tensor):
                self.storages.add(_storage(value))
        return func(*args, **kwargs)


class _StridedOps(TorchDispatchMode):
    """Notes (``seen``) whether an op that makes a new tensor met one not laid out compactly,
    as an input or as its result: only there do meta kernels and the host's own kernels lay
    out results differently (``group_norm``, ``roll``, ``pixel_shuffle``, reflection padding
    of a channels_last tensor: eager keeps channels_last, the meta kernel gives a contiguous
    tensor; ``2 ** x`` the other way round).  Of a matrix product only the result is looked
    at: every ``nn.Linear`` feeds one its weight transposed."""

    def __init__(self):
        super().__init__()
        self.seen = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if not self.seen and not getattr(func, "is_view", False):
            looked_at = out if func in _LAYOUT_BLIND_OPS else (args, kwargs, out)
            self.seen = any(not _compact_strides(t) for t in pytree.tree_leaves(looked_at)
                            if isinstance(t, torch.Tensor))
        return out


def _copy_as_laid_out(value):
    """A copy of a tensor with its strides and storage offset (a broadcast argument stays one,
    where ``clone`` would compact it), in a storage of its own."""
    if not isinstance(value, torch.Tensor):
        return value
    storage = torch.Tensor.untyped_storage(value).clone()
    return torch.empty(0, dtype=value.dtype).set_(storage, torch.Tensor.storage_offset(value),
                                                   value.shape, torch.Tensor.stride(value))


def _layouts_as_eager(program, args, views, layouts, output_views) -> None:
    """Correct the output layouts the meta run found by one eager run of ``program`` on copies
    of the host arguments (the arguments themselves and the host's generator are left as they
    were; all are copied: a batch norm's running statistics are updated where the meta run
    sees no write to them): eager's kernels decide the strides a caller sees, and meta
    kernels do not always agree with them. A graph eager cannot run on these copies (an index
    its data makes out of range), or one with a device argument, keeps the meta run's answer."""
    if any(isinstance(a, torch.Tensor) and a.device.type != "cpu" for a in args):
        return
    try:
        with _disable_current_modes(), torch.no_grad(), dev.host_random_kept():
            out = program(*[_copy_as_laid_out(a) for a in args])
    except Exception:
        return
    leaves = pytree.tree_leaves(out)
    for k, leaf in enumerate(leaves):
        if not isinstance(leaf, torch.Tensor) or k in views:
            continue
        if k in output_views:
            base = leaves[output_views[k].base]
            if _storage(leaf) == _storage(base):
                output_views[k] = OutputView(output_views[k].base, tuple(leaf.shape), leaf.stride(),
                                             leaf.storage_offset(), detached=output_views[k].detached)
            continue
        layout = EagerLayout.of_output(leaf)
        if layout is None:
            layouts.pop(k, None)
        else:
            layouts[k] = layout
