"""The command line: torchbench-style flags parsed into one ``Options`` value.

Nothing heavy is imported here, so ``python -m bench --help`` answers at once.
"""

import argparse
import dataclasses

# The seed's table, in its order.
ALL_MODELS = (
    "resnet18",
    "resnet50",
    "resnext50_32x4d",
    "alexnet",
    "mobilenet_v2",
    "mnasnet1_0",
    "squeezenet1_1",
    "vgg16",
    "BERT_pytorch",
    "timm_vision_transformer",
)

# The default run: a CNN, a mobile net, a transformer; under 10 minutes on 2 cores.
DEFAULT_MODELS = ("resnet18", "mobilenet_v2", "BERT_pytorch")

BACKENDS = ("eager", "torchxla_trivial", "torchxla_trace_once")
DEFAULT_BACKENDS = ("torchxla_trivial", "torchxla_trace_once")
PEERS = ("openxla_eval",)
REGIMES = ("standard", "small")


@dataclasses.dataclass(frozen=True)
class Options:
    """Everything a run needs to know, after defaults are applied."""

    mode: str  # "performance" or "accuracy"
    models: tuple
    backends: tuple
    peers: tuple
    regimes: tuple
    use_xla_baseline: bool
    randomize_input: bool
    batch_size: int
    iterations: int
    warmup: int
    output: str
    breakdown: bool
    progress: bool
    seed: int

    @property
    def baseline(self):
        """Name of the peer every speedup is relative to."""
        return "xla_lazy" if self.use_xla_baseline else "eager_cpu"

    @property
    def contenders(self):
        """Peers compared with the baseline, in table order: minidynamo's backends, then references."""
        return tuple(self.backends) + tuple(self.peers)


def build_parser():
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Measure minidynamo's XLA backends against PyTorch/XLA lazy mode "
        "and torch.compile(backend='openxla_eval').",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--performance", action="store_true", help="time the peers (default)")
    mode.add_argument("--accuracy", action="store_true", help="only compare outputs with the baseline")
    parser.add_argument("--only", action="append", metavar="MODEL", choices=ALL_MODELS,
                        help="run this model (repeatable), one of: %s; default: %s"
                        % (", ".join(ALL_MODELS), ", ".join(DEFAULT_MODELS)))
    parser.add_argument("--all", action="store_true", help="run every model of the seed's table")
    parser.add_argument("--backend", action="append", choices=BACKENDS,
                        help="minidynamo backend (repeatable); default: %s" % ", ".join(DEFAULT_BACKENDS))
    parser.add_argument("--peers", action="append", choices=PEERS, default=None,
                        help="reference implementation to run alongside (repeatable)")
    parser.add_argument("--use-xla-baseline", action="store_true",
                        help="baseline = the model run lazily on XLA (default: eager PyTorch on the CPU)")
    parser.add_argument("--randomize-input", action="store_true",
                        help="fresh random input values (same shapes) at every iteration")
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--iterations", type=int, default=20, help="timed iterations per model")
    parser.add_argument("--warmup", type=int, default=3, help="untimed iterations after the first call")
    parser.add_argument("--output", default="bench_results", metavar="DIR",
                        help="where CSV, JSON and PNG files go (default: %(default)s)")
    regime = parser.add_mutually_exclusive_group()
    regime.add_argument("--small", action="store_true",
                        help="overhead-bound regime: 32x32 images, sequence 16")
    regime.add_argument("--both-regimes", action="store_true", help="run the standard and the small regime")
    parser.add_argument("--breakdown", action="store_true",
                        help="overhead study: split each call into guard, trace, lookup, execute, transfer")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--seed", type=int, default=1337)
    parser.add_argument("--training", action="store_true",
                        help="time one training step instead (bench/training.py; its own flags: "
                        "--only, --peer, --small, --batch-size, --iterations, --warmup, "
                        "--breakdown, --output, --seed)")
    return parser


def parse_args(argv=None):
    """Parse ``argv`` (default: ``sys.argv[1:]``) into ``Options``; bad values exit with usage."""
    parser = build_parser()
    args = parser.parse_args(argv)
    for name in ("batch_size", "iterations"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.warmup < 0:
        parser.error("--warmup must be at least 0")
    if args.all and args.only:
        parser.error("--all and --only exclude each other")
    models = ALL_MODELS if args.all else tuple(dict.fromkeys(args.only or DEFAULT_MODELS))
    if args.both_regimes:
        regimes = REGIMES
    else:
        regimes = ("small",) if args.small else ("standard",)
    return Options(
        mode="accuracy" if args.accuracy else "performance",
        models=models,
        backends=tuple(dict.fromkeys(args.backend or DEFAULT_BACKENDS)),
        peers=tuple(dict.fromkeys(args.peers or ())),
        regimes=regimes,
        use_xla_baseline=args.use_xla_baseline,
        randomize_input=args.randomize_input,
        batch_size=args.batch_size,
        iterations=args.iterations,
        warmup=args.warmup,
        output=args.output,
        breakdown=args.breakdown,
        progress=not args.no_progress,
        seed=args.seed,
    )
