"""Per-call overhead of a cache hit, in ns: minidynamo vs torch.compile (a benchmark, not a test).

    python -m bench.overhead [--repeats 61 --calls 300]

(a) ``x + 1`` on one small tensor, (b) a 10-op function of 3 tensors: the plain eager call,
``minidynamo.optimize("eager")`` and ``torch.compile(fn, backend="eager")`` (the peer), measured
interleaved in one process; median of repeats.  Overhead = call cost - eager cost.
(c) resnet18's and BERT_pytorch's forward guard check alone: minidynamo's guard function vs the C++
guard tree of torch.compile's cache entry (by default, and with every tensor checked, as ours
does), warm (checks back to back) and cold (each right after a sweep that empties the caches, as
the model's own run does between two calls on the hit path), then three changes each guard
should see (a weight's ``.data`` replaced, its ``requires_grad`` flipped, a forward hook
registered on a submodule) and which guards see them.
Then where a minidynamo hit spends its time.
Only this benchmark may import torch._dynamo (for the peer).
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from typing import Callable

import torch


def add_one(x):
    return x + 1


def ten_ops(a, b, c):
    t = a * b + c
    t = t.relu() - a
    t = t * 2.0 + b.sin()
    t = t / (c.abs() + 1.0)
    return t.sum(dim=-1, keepdim=True) + t


def per_call_ns(call: Callable[[], object], n: int) -> float:
    """Time per call of ``call`` over a loop of ``n``, the empty loop subtracted."""
    start = time.perf_counter_ns()
    for _ in range(n):
        call()
    loop = time.perf_counter_ns() - start
    start = time.perf_counter_ns()
    for _ in range(n):
        pass
    empty = time.perf_counter_ns() - start
    return (loop - empty) / n


def interleaved_medians(variants: dict[str, Callable[[], object]], n: int, repeats: int,
                        summary=statistics.median) -> dict[str, float]:
    """Median (or ``summary``) per-call ns of each variant, variants alternating within every
    repeat."""
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for call in variants.values():   # warm up: compile, fill caches
        for _ in range(20):
            call()
    for _ in range(repeats):
        for name, call in variants.items():
            samples[name].append(per_call_ns(call, n))
    return {name: summary(values) for name, values in samples.items()}


# Twice this machine's last-level cache (32 MB L3): a sweep through it leaves the caches and the
# TLB holding none of what a guard reads, as a model's forward does between two calls.
SWEEP_MB = 64


def cold_medians(variants: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Median ns of one call of each variant made right after a sweep through ``SWEEP_MB`` of
    memory (timed one call at a time; the median of an empty call, timed the same way, is
    subtracted). A guard on the hit path meets its objects cold: the model ran in between."""
    sweep = torch.ones(SWEEP_MB * 2**20 // 4)
    calls = {"(empty)": lambda: None, **variants}
    samples: dict[str, list[int]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            sweep.sum()
            start = time.perf_counter_ns()
            call()
            samples[name].append(time.perf_counter_ns() - start)
    empty = statistics.median(samples.pop("(empty)"))
    return {name: statistics.median(values) - empty for name, values in samples.items()}


def call_variants(fn, args) -> dict[str, Callable[[], object]]:
    import torch._dynamo

    import minidynamo

    ours = minidynamo.optimize("eager")(fn)
    peer = torch.compile(fn, backend="eager")
    return {"eager": lambda: fn(*args), "minidynamo": lambda: ours(*args), "torch.compile": lambda: peer(*args)}


def report_calls(title: str, medians: dict[str, float]) -> dict[str, float]:
    eager = medians["eager"]
    ours = medians["minidynamo"] - eager
    peer = medians["torch.compile"] - eager
    print(f"\n{title}")
    for name, ns in medians.items():
        extra = "" if name == "eager" else f"   overhead {ns - eager:8.0f} ns"
        print(f"  {name:14s} {ns:9.0f} ns/call{extra}")
    print(f"  overhead ratio minidynamo / torch.compile = {ours / peer:.3f}")
    return {"minidynamo_overhead_ns": ours, "torch_compile_overhead_ns": peer, "ratio": ours / peer}


# ----------------------------------------------------------------------------- (c)


def guard_models() -> dict[str, Callable[[], tuple]]:
    """The models whose forward entry's guard check is compared: name -> () -> (model, args)."""

    def resnet18():
        import torchvision

        torch.manual_seed(0)
        return torchvision.models.resnet18().eval(), (torch.randn(1, 3, 64, 64),)

    def bert():
        from bench.models import BERT_VOCAB, _bert

        torch.manual_seed(0)
        shape = (1, 16)
        return _bert(None).eval(), (torch.randint(1, BERT_VOCAB, shape), torch.randint(1, 3, shape))

    return {"resnet18": resnet18, "BERT_pytorch": bert}


def _peer_guard(model, args, skip_tensor_guards: bool, skip_hook_guards: bool = True):
    """torch.compile's guard tree for ``model``'s forward, the f_locals it checks, and the names
    torch.compile put into the forward's globals (its guards read them; ``torch._dynamo.reset()``
    removes them, after which every check fails on a KeyError: put them back before timing)."""
    import inspect

    import torch._dynamo
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    forward = type(model).forward
    torch._dynamo.reset()
    before = set(forward.__globals__)
    with torch._dynamo.config.patch(skip_tensor_guards_with_matching_dict_tags=skip_tensor_guards,
                                    skip_nnmodule_hook_guards=skip_hook_guards):
        peer = torch.compile(model, backend="eager")
        peer(*args)
    manager = _debug_get_cache_entry_list(forward.__code__)[0].guard_manager
    f_locals = dict(zip(inspect.signature(forward).parameters, (model, *args)))
    assert manager.check(f_locals)
    added = {name: value for name, value in forward.__globals__.items() if name not in before}
    torch._dynamo.reset()
    return manager, f_locals, added


def _passing(manager, f_locals) -> None:
    """A timed peer check must pass (a failing one stops early and times nothing useful)."""
    if not manager.check(f_locals):
        raise AssertionError(f"torch.compile's guard fails: {manager.check_verbose(f_locals)}")


def guard_check(name: str, build, repeats: int) -> dict[str, float]:
    """One guard check of ``name``'s forward cache entry: minidynamo vs torch.compile's C++ guard tree.

    The peer runs three ways: as configured by default (``skip_tensor_guards_with_matching_dict_tags``:
    it skips the tensor checks of parameters and buffers while their module dicts keep their tags,
    so it does not see ``p.data = p.data.double()`` or ``p.requires_grad_(False)``; and
    ``skip_nnmodule_hook_guards``: it does not see a hook registered after the compile), with the
    hooks guarded as minidynamo guards them, and with every tensor checked as minidynamo checks
    them (hooks not guarded).  Same process, interleaved."""
    import minidynamo

    model, args = build()
    forward = type(model).forward
    print(f"\n(c) {name} forward: one guard check of the cache entry (eval mode, grad on)")
    default_manager, f_locals, added = _peer_guard(model, args, True)
    hooks_manager, _, added_hooks = _peer_guard(model, args, True, skip_hook_guards=False)
    strict_manager, _, added_strict = _peer_guard(model, args, False)
    added = {**added, **added_hooks, **added_strict}
    forward.__globals__.update(added)
    managers = (default_manager, hooks_manager, strict_manager)
    for manager in managers:
        _passing(manager, f_locals)
    checks = {"torch.compile (default)": lambda: default_manager.check(f_locals),
              "torch.compile (+ hooks)": lambda: hooks_manager.check(f_locals),
              "torch.compile (all tensors)": lambda: strict_manager.check(f_locals)}
    minidynamo.reset()
    ours = minidynamo.optimize("eager")(model)
    ours(*args)
    entries = [e for e in minidynamo.cache_entries(model) if e.guard_fn is not None]
    if not entries:
        print(f"  minidynamo did not capture {name}: {minidynamo.counters['fallback_reasons']}")
        return {}
    guard_fn = entries[0].guard_fn
    assert guard_fn(forward, model, *args), guard_fn.failure_reason(forward, model, *args)
    # Called as the frame hook calls it, by vectorcall from an array: ``lambda: guard_fn(forward,
    # model, *args)`` would build a tuple per call, and its young-generation collections would be
    # counted as the guard's (about 0.3 us a check).
    checks["minidynamo guard_fn"] = functools.partial(guard_fn, forward, model, *args)
    tensor_check = _tensor_batch_check(guard_fn, forward, model, *args)
    if tensor_check is not None:
        checks["  of which tensor checks"] = tensor_check
    memo = _dict_memo(guard_fn)
    if memo is not None:
        checks["  of which dict tags (memo)"] = memo.valid
        # The memo skips its dict tags while no dict at all changed since its last check (a loop
        # that only calls the model); a program that changes any dict between calls pays for
        # all of them: timed as a dict change then the check, less the dict change alone.
        change_a_dict = _dict_changer()
        checks["(a dict change alone)"] = change_a_dict
        checks["(a dict change, then minidynamo guard_fn)"] = _then(change_a_dict, checks["minidynamo guard_fn"])
    print(f"  minidynamo: {len(guard_fn.guards)} guards, "
          f"{sum(g.kind == 'TENSOR_MATCH' for g in guard_fn.guards)} tensor matches, runs as "
          f"{type(guard_fn).__name__}")
    if memo is not None:
        dicts, owners = memo.noted
        modules = sum(1 for _ in model.modules())
        print(f"  its memo checks {dicts} dict tags and {owners} objects' __dict__ per call (the model's "
              f"{modules} modules have 4 hook dicts each, which torch.compile does not guard by "
              f"default: skip_nnmodule_hook_guards)")
    # Small loops, best of many: a shared machine's load comes in bursts.  Only positive samples:
    # an empty-loop time caught in a burst can make one negative.
    best = interleaved_medians(checks, n=20, repeats=repeats,
                               summary=lambda xs: min([x for x in xs if x > 0] or [float("nan")]))
    medians = interleaved_medians(checks, n=20, repeats=repeats)
    for manager in managers:
        _passing(manager, f_locals)
    _net_of_the_dict_change(best), _net_of_the_dict_change(medians)
    for label, ns in best.items():
        print(f"  {label:28s} {ns / 1000:8.2f} us best   {medians[label] / 1000:8.2f} us median")
    print(f"  ratio minidynamo / torch.compile (all tensors) = "
          f"{best['minidynamo guard_fn'] / best['torch.compile (all tensors)']:.2f} (best), "
          f"{medians['minidynamo guard_fn'] / medians['torch.compile (all tensors)']:.2f} (median)")
    cold = cold_medians(checks, repeats=3 * repeats)
    _net_of_the_dict_change(cold)
    for manager in managers:
        _passing(manager, f_locals)
    print(f"  cold (each check right after a {SWEEP_MB} MB sweep, as after a forward; "
          f"median of {3 * repeats}):")
    for label, ns in cold.items():
        print(f"  {label:28s} {ns / 1000:8.2f} us")
    ours = "minidynamo guard_fn"
    for peer in ("torch.compile (default)", "torch.compile (+ hooks)"):
        print(f"  ratio minidynamo / {peer} = {best[ours] / best[peer]:.2f} (warm, best), "
              f"{cold[ours] / cold[peer]:.2f} (cold)")
    # What each guard sees: a weight deep in the module tree changed in place (no module dict
    # changes), and a forward hook registered on the module that holds it.
    name, weight = max(((n, p) for n, p in model.named_parameters() if p.dim() >= 2), key=lambda np: np[0].count("."))
    holder = model.get_submodule(name.rpartition(".")[0])
    old, hooks = weight.data, []
    for change, apply, undo in (
            (f"{name}.data = data.double()", lambda: setattr(weight, "data", old.double()),
             lambda: setattr(weight, "data", old)),
            (f"{name}.requires_grad_(False)", lambda: weight.requires_grad_(False),
             lambda: weight.requires_grad_(True)),
            (f"{name.rpartition('.')[0]}.register_forward_hook(...)",
             lambda: hooks.append(holder.register_forward_hook(lambda module, args, out: out * 0)),
             lambda: hooks.pop().remove())):
        apply()
        try:
            print(f"  after {change}: passes? torch.compile (default) {default_manager.check(f_locals)}, "
                  f"(+ hooks) {hooks_manager.check(f_locals)}, (all tensors) {strict_manager.check(f_locals)}, "
                  f"minidynamo {guard_fn(forward, model, *args)}")
        finally:
            undo()
    for name in added:
        forward.__globals__.pop(name, None)
    minidynamo.reset()
    return best


def _dict_changer() -> Callable[[], None]:
    """A call that changes a private dict (a new tag: some dict changed since the last check)."""
    private, flip = {}, [False]

    def change():
        flip[0] = not flip[0]
        private[0] = flip[0]
    return change


def _then(first, second):
    def both():
        first()
        return second()
    return both


def _net_of_the_dict_change(times: dict) -> None:
    """Replace the two dict-change rows by one: the guard's time when some dict had changed."""
    alone = times.pop("(a dict change alone)", None)
    both = times.pop("(a dict change, then minidynamo guard_fn)", None)
    if alone is not None and both is not None:
        times["minidynamo, a dict changed"] = both - alone


def _dict_memo(guard_fn):
    """The DictMemo a guard's fast path asks first (None without one)."""
    from guards import native

    fallback = getattr(guard_fn, "fallback", guard_fn)
    namespace = getattr(fallback, "__globals__", {})
    return next((value for value in namespace.values()
                 if native.DictMemo is not None and isinstance(value, native.DictMemo)), None)


def _tensor_batch_check(guard_fn, func, *args):
    """The tensor checks of a guard function alone, as the one C call it makes (or None)."""
    from guards import native
    from guards.source import FrameValues

    frame = FrameValues(func, dict(zip(guard_fn.failure_reason.arg_names, args)),
                        func.__globals__, func.__builtins__)
    tensor_guards = [g for g in guard_fn.guards if g.kind == "TENSOR_MATCH"]
    tensors = [g.source.read(frame) for g in tensor_guards]
    specs = [native.tensor_spec(g.expected) for g in tensor_guards]
    if native.TensorMatch is None or not all(specs):
        return None
    check = native.TensorMatch(specs)
    return functools.partial(check, *tensors)


# ----------------------------------------------------------------------------- profile


def hit_path_profile(fn, args, repeats: int, calls: int) -> None:
    """Where a minidynamo cache hit spends its time, phase by phase."""
    import minidynamo

    optimized = minidynamo.optimize("eager")(fn)
    optimized(*args)
    code_fn = fn
    (_, guard_fn, compiled_fn), *_ = [e for e in minidynamo.cache_entries(optimized) if e.guard_fn is not None]
    phases = {
        "eager fn(*args)": lambda: fn(*args),
        "optimized(*args)": lambda: optimized(*args),
        "guard_fn": lambda: guard_fn(code_fn, *args),
        "compiled_fn": lambda: compiled_fn(code_fn, *args),
    }
    read_inputs = getattr(compiled_fn, "read_inputs", None)
    if read_inputs is not None:
        phases["reader"] = lambda: read_inputs(code_fn, *args)
    graph = getattr(compiled_fn, "compiled_graph", None)
    if graph is not None and read_inputs is not None:
        inputs = read_inputs(code_fn, *args)
        phases["compiled graph alone"] = lambda: graph(*inputs)
    # Phases are differences of small numbers: the best of the repeats is less noisy here.
    medians = interleaved_medians(phases, n=calls, repeats=repeats, summary=min)
    print(f"\nhit path of {fn.__name__} (each phase timed alone through a lambda, best of repeats):")
    for name, ns in medians.items():
        print(f"  {name:22s} {ns:9.0f} ns")
    outside = medians["optimized(*args)"] - medians["guard_fn"] - medians["compiled_fn"]
    wrapper = medians["compiled_fn"] - medians.get("compiled graph alone", medians["compiled_fn"])
    print(f"  => hook + optimize wrapper ~{outside:.0f} ns, compiled_fn around the graph ~{wrapper:.0f} ns "
          f"(reader included), guard ~{medians['guard_fn']:.0f} ns")
    print("  guard source:")
    print("    " + guard_fn.source.replace("\n", "\n    "))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # Many short interleaved loops: on a shared machine load comes in bursts, and a median over
    # many short samples of every variant is steadier than a few long ones.
    parser.add_argument("--repeats", type=int, default=61)
    parser.add_argument("--calls", type=int, default=300, help="calls per timed loop")
    parser.add_argument("--skip-resnet", action="store_true", help="skip (c), the model guard checks")
    parser.add_argument("--only-guards", action="store_true", help="run only (c)")
    options = parser.parse_args(argv)
    torch.set_num_threads(1)
    if options.only_guards:
        for name, build in guard_models().items():
            guard_check(name, build, options.repeats)
        return
    x = torch.randn(8)
    a, b, c = torch.randn(4, 8), torch.randn(4, 8), torch.randn(4, 8)
    results = {
        "a": report_calls("(a) x + 1, one tensor [8]", interleaved_medians(
            call_variants(add_one, (x,)), options.calls, options.repeats)),
        "b": report_calls("(b) 10 ops on three tensors [4, 8]", interleaved_medians(
            call_variants(ten_ops, (a, b, c)), options.calls, options.repeats)),
    }
    print(f"\ntargets: (a) ratio <= 0.1: {results['a']['ratio']:.3f}; (b) ratio <= 0.5: {results['b']['ratio']:.3f}")
    if not options.skip_resnet:
        for name, build in guard_models().items():
            guard_check(name, build, options.repeats)
    hit_path_profile(add_one, (x,), options.repeats, options.calls)


if __name__ == "__main__":
    main()
