"""timm's image models, tried as a new user would: forty architectures (convnets, vision
transformers, hybrids, MLP mixers) built with random weights, called through
``minidynamo.optimize`` and compared with eager on every call.

    python -m bench.timm_sweep                          # inference (eval, no_grad), every model
    python -m bench.timm_sweep --train                  # train mode: drop path and dropout on, a
                                                        # backward per call, gradients compared
    python -m bench.timm_sweep --only resnet18,vit_tiny_patch16_224 --backend torchxla_trace_once
    python -m bench.timm_sweep --train --float64 --only levit_128s --backend torchxla_trace_once

Per model: whether every call equalled eager (outputs; in --train also every parameter's gradient
and every floating buffer), graphs compiled (recompiles among them: levit and tiny_vit fill their
attention-bias cache on the first eval call, which the guard sees), graph breaks and fallbacks
over the calls, and the first reason of each.  "one graph" means one graph per compile, no break,
no fallback.  Convnets run at
64x64, the models that need their own size (patch grids, windows) at it.  Both sides draw the
same random numbers (the seed is set before each call).  ``--float64`` runs both sides in double
precision: where float32 rounding makes XLA's gradients and ATen's differ (batch norms over a few
values), a right graph agrees to about 1e-10 there and a wrong one does not.  No downloads.  Not a
test: minutes.
"""

from __future__ import annotations

import time

import torch

from . import sweeps

MODELS = (
    # convnets
    "resnet18", "resnest14d", "regnetx_002", "efficientnet_b0", "mobilenetv3_small_100", "ghostnet_100",
    "rexnet_100", "densenet121", "dla34", "vovnet39a", "cspresnet50", "res2net50_14w_8s", "selecsls42b",
    "tresnet_m", "xception41", "hrnet_w18_small", "nfnet_f0", "dm_nfnet_f0", "convnext_atto",
    # transformers and hybrids
    "vit_tiny_patch16_224", "deit_tiny_patch16_224", "beit_base_patch16_224", "eva02_tiny_patch14_224",
    "swin_tiny_patch4_window7_224", "levit_128s", "coat_lite_tiny", "pit_ti_224", "twins_svt_small",
    "xcit_nano_12_p16_224", "crossvit_tiny_240", "maxvit_nano_rw_256", "tiny_vit_5m_224", "fastvit_t8",
    "efficientformer_l1", "edgenext_xx_small", "mobilevit_xxs",
    # MLPs and pooling mixers
    "mixer_s16_224", "poolformer_s12",
)
CONVNET_SIZE = 64
OWN_SIZE = ("vit", "deit", "beit", "eva", "swin", "levit", "coat", "pit", "twins", "xcit", "crossvit", "maxvit",
            "tiny_vit", "mixer", "efficientformer")


def build(name: str, train: bool, dtype=torch.float32):
    """(model, an input batch maker) with random weights, seeded: two builds are equal."""
    import timm

    model = None
    for extra in ([dict(drop_path_rate=0.1, drop_rate=0.1), dict(drop_rate=0.1)] if train else []) + [{}]:
        torch.manual_seed(0)
        try:                          # (not every architecture takes drop path, or dropout)
            model = timm.create_model(name, pretrained=False, num_classes=10, **extra)
            break
        except TypeError:
            continue
    channels, height, _ = model.default_cfg.get("input_size", (3, 224, 224))
    side = height if name.startswith(OWN_SIZE) else CONVNET_SIZE
    return model.train(train).to(dtype), (lambda: torch.randn(2 if train else 1, channels, side, side, dtype=dtype))


def run_one(name: str, backend: str, train: bool, calls: int, dtype=torch.float32) -> dict:
    import minidynamo

    reference, make_input = build(name, train, dtype)
    model, _ = build(name, train, dtype)
    minidynamo.reset()
    compiled = minidynamo.optimize(backend)(model)
    equal, start = True, time.perf_counter()
    with torch.set_grad_enabled(train):
        for call in range(calls):
            x = make_input()
            torch.manual_seed(100 + call)
            expected = reference(x)
            torch.manual_seed(100 + call)
            got = compiled(x)
            equal &= sweeps.close(expected, got.to(expected.device))
            if train:
                expected.sum().backward()
                got.sum().backward()
                grads = [(a.grad, b.grad) for a, b in zip(reference.parameters(), model.parameters())
                         if a.grad is not None and b.grad is not None]
                floor = 1e-6 * max((a.abs().max().item() for a, _ in grads), default=0.0)
                equal &= all(sweeps.close(a, b.to(a.device), floor) for a, b in grads)
                equal &= all(sweeps.close(a, b.to(a.device)) for a, b in zip(reference.buffers(), model.buffers())
                             if a.is_floating_point())
    counters = minidynamo.counters
    fallbacks, breaks = list(counters["fallback_reasons"]), list(counters["break_reasons"])
    return dict(name=name, equal=bool(equal), graphs=counters["compiles"], recompiles=counters["recompiles"],
                breaks=len(breaks),
                fallbacks=len(fallbacks), seconds=time.perf_counter() - start, reason=(fallbacks + breaks + [""])[0])


def main(argv=None) -> None:
    sweeps.run_table(sweeps.parse(argv, __doc__, MODELS), run_one)


if __name__ == "__main__":
    main()
