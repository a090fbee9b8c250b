"""A torchbench-style runner that measures what "trace once + guards" saves over lazy retracing.

    python -m bench --performance --use-xla-baseline --peers openxla_eval
    python -m bench --small --breakdown --only resnet18

One process, one model at a time; every peer (the baseline, minidynamo's backends, the
``torch.compile(backend="openxla_eval")`` reference) is called once per iteration, in rotating
order, so machine noise hits all alike. Heavy libraries (torch_xla, torchvision, timm,
torch._dynamo) are imported only when a model or peer needs them, so ``--help`` is instant.

Modules, one job each:
    options    command line -> Options
    models     the model zoo: random weights, deterministic inputs, two regimes
    peers      how each contender is prepared and called (model on the XLA device, CPU inputs
               in, CPU outputs back, the same copies for every XLA peer)
    xla_probe  readings of torch_xla's own runtime metrics (XLA execution time per call)
    measure    the interleaved timing loop (fresh input tensors every call), first-call
               latency, accuracy per iteration
    breakdown  the overhead study: where each call's time goes, phase by phase
    accuracy   output comparison with stated tolerances
    stats      median, geomean
    results    what a run found per model, and what follows (speedup, spread, overhead, limit)
    report     terminal tables (the seed's grid format), CSV, JSON
    plots      PNG charts: speedups with limits, the stacked per-call breakdown
    runner     ties it together (``main``), progress bar, counters of minidynamo and xla_bridge

Apart: ``training`` (``python -m bench --training``: one training step per peer, gradients
checked against lazy mode), ``host_data_cost`` (what xla_bridge's host-data policy costs trace_once, per set-up),
``xla_resnet18``, ``overhead``, ``hook_overhead``, ``first_call`` (``python -m bench.first_call``:
each peer's first call in a fresh process, split into trace, guards, backend, XLA compile, run).
"""
