"""Saved-activation memory of trace_once's training partition, on meta tensors (no device).

    python -m bench.training_memory [--only MODEL] [--small] [--batch-size N]

For each model: minidynamo captures the training-mode forward (dropout off, as in
``bench.training``), ``xla_bridge.joint_graph`` records forward + backward on meta tensors and
partitions it with "save what backward reads". Printed: the tensors the forward graph hands to
the backward graph (count and MiB; a view is recomputed, not saved), what eager autograd saves
for the same call (distinct storages seen by ``saved_tensors_hooks``, on the CPU), the
parameters' MiB for scale, and the joint graph's op counts. Nothing is computed and nothing
runs on XLA, so the standard sizes cost seconds.
"""

import argparse

import torch


def capture(model, inputs):
    """The fx graph and example inputs minidynamo hands a backend for ``model(*inputs)``."""
    import minidynamo

    seen = {}

    def keep(gm, example_inputs):
        seen.setdefault("graph", (gm, list(example_inputs)))
        return gm.forward

    minidynamo.reset()
    minidynamo.optimize(keep)(model)(*inputs)
    return seen["graph"]


def eager_saved_bytes(model, inputs) -> int:
    """Bytes of the distinct storages eager autograd saves for backward in ``model(*inputs)``,
    parameters and inputs excluded (``saved_tensors_hooks`` sees every saved tensor)."""
    owned = {p.untyped_storage().data_ptr() for p in model.parameters()}
    owned |= {t.untyped_storage().data_ptr() for t in inputs}
    storages = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in owned:
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        model(*inputs)
    return sum(storages.values())


def measure(name, regime, batch_size, seed=1337):
    from bench.models import make_inputs
    from bench.training import build_training_model
    from xla_bridge.joint_graph import joint_partition
    from xla_bridge.lifting import FlatProgram

    model = build_training_model(name, regime, seed)
    inputs = make_inputs(name, regime, batch_size, torch.Generator().manual_seed(seed))
    gm, example_inputs = capture(model, inputs)
    flat = FlatProgram(gm)
    args = example_inputs + flat.read_state()
    part = joint_partition(flat, args, [isinstance(a, torch.Tensor) and a.requires_grad
                                        for a in args])
    ops = sum(1 for g in (part.forward, part.backward) for n in g.graph.nodes
              if n.op == "call_function")
    parameter_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    eager_bytes = eager_saved_bytes(model, inputs)
    return dict(model=name, regime=regime.name, batch_size=batch_size,
                saved_count=part.saved_count, saved_mib=part.saved_bytes / 2**20,
                saved_args=len(part.saved_args), parameter_mib=parameter_bytes / 2**20,
                eager_saved_mib=eager_bytes / 2**20,
                ops=ops)


def main(argv=None):
    from bench.models import REGIMES

    parser = argparse.ArgumentParser(prog="python -m bench.training_memory")
    parser.add_argument("--only", action="append")
    parser.add_argument("--small", action="store_true")
    parser.add_argument("--batch-size", type=int, default=2)
    options = parser.parse_args(argv)
    regime = REGIMES["small" if options.small else "standard"]
    print(f"saved activations, trace_once training partition (save what backward reads), "
          f"{regime.name} regime, batch {options.batch_size}")
    print(f"{'model':<16}{'saved tensors':>15}{'saved MiB':>12}{'per sample':>12}"
          f"{'eager saves':>12}{'params MiB':>12}{'aten ops':>10}")
    for name in options.only or ("resnet18", "BERT_pytorch"):
        row = measure(name, regime, options.batch_size)
        print(f"{name:<16}{row['saved_count']:>15}{row['saved_mib']:>12.1f}"
              f"{row['saved_mib'] / options.batch_size:>12.1f}{row['eager_saved_mib']:>12.1f}"
              f"{row['parameter_mib']:>12.1f}"
              f"{row['ops']:>10}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
