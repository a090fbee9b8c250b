"""Sweep real models through ``minidynamo.explain`` and compare with eager (not a pytest file).

    PJRT_DEVICE=CPU python tests/tracer/sweep_models.py                 # everything
    python tests/tracer/sweep_models.py --only resnet18 vit_b_16        # some models
    python tests/tracer/sweep_models.py --family timm --grad            # + one pass with grad

One line per model: graphs, fallbacks, max |traced - eager|, and the first fallback reason.
Small inputs (1x3x64x64 unless a model needs more), random weights, eval mode, no_grad; with
``--grad`` the models in GRAD_MODELS also run once with grad enabled.  The giant variants of a
family (hundreds of millions of parameters) are skipped unless ``--big``: their code is the
code of their small siblings.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback

os.environ.setdefault("PJRT_DEVICE", "CPU")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch  # noqa: E402

import minidynamo  # noqa: E402

BIG = {"vit_h_14", "vit_l_16", "vit_l_32", "regnet_y_128gf", "regnet_y_32gf", "regnet_x_32gf", "regnet_y_16gf",
       "regnet_x_16gf", "efficientnet_v2_l", "efficientnet_b7", "efficientnet_b6", "convnext_large",
       "resnext101_64x4d", "resnext101_32x8d", "wide_resnet101_2", "swin_v2_b", "swin_b", "vgg19_bn", "vgg19"}
IMAGE_SIZE = {"inception_v3": 96, "maxvit_t": 224}       # what the architecture needs at least
TORCHVISION_KWARGS = {"vit_b_16": {"image_size": 64}, "vit_b_32": {"image_size": 64},
                      "vit_l_16": {"image_size": 64}, "vit_l_32": {"image_size": 64},
                      "vit_h_14": {"image_size": 56}, "inception_v3": {"aux_logits": False, "init_weights": False},
                      "googlenet": {"aux_logits": False, "init_weights": False}}
TIMM_MODELS = {   # name -> (kwargs, image size)
    "resnet18": ({}, 64), "resnet50d": ({}, 64), "efficientnet_b0": ({}, 64), "mobilenetv3_small_100": ({}, 64),
    "convnext_atto": ({}, 64), "deit_tiny_patch16_224": ({"img_size": 64}, 64),
    "vit_tiny_patch16_224": ({"img_size": 64}, 64),
    "swin_tiny_patch4_window7_224": ({"img_size": 112}, 112), "mixer_s16_224": ({"img_size": 64}, 64),
    "regnetx_002": ({}, 64), "regnety_002": ({}, 64), "levit_128s": ({"img_size": 64}, 64),
    "poolformer_s12": ({}, 64), "coat_lite_tiny": ({"img_size": 64}, 64), "mobilevit_xxs": ({}, 64),
    "ghostnet_100": ({}, 64), "efficientformer_l1": ({}, 224), "beit_base_patch16_224": ({"img_size": 64}, 64),
    "dla34": ({}, 64), "dpn68": ({}, 64), "hrnet_w18_small": ({}, 64), "inception_v4": ({}, 96),
    "nf_resnet26": ({}, 64), "res2net50_26w_4s": ({}, 64), "resnest14d": ({}, 64), "rexnet_100": ({}, 64),
    "selecsls42b": ({}, 64), "cspresnet50": ({}, 64), "cspdarknet53": ({}, 64), "gernet_s": ({}, 64),
    "lcnet_050": ({}, 64), "mobileone_s0": ({}, 64), "pvt_v2_b0": ({}, 64), "twins_svt_small": ({}, 64),
    "visformer_tiny": ({}, 224), "convit_tiny": ({"img_size": 64}, 64), "edgenext_xx_small": ({}, 64),
    "crossvit_tiny_240": ({}, 240), "cait_xxs24_224": ({"img_size": 64}, 64), "xcit_nano_12_p16_224": ({"img_size": 64}, 64),
    "tnt_s_patch16_224": ({"img_size": 64}, 64), "pit_ti_224": ({"img_size": 64}, 64), "volo_d1_224": ({"img_size": 64}, 64),
    "sequencer2d_s": ({}, 64), "efficientvit_b0": ({}, 64), "fastvit_t8": ({}, 64), "repvgg_a0": ({}, 64),
    "densenet121": ({}, 64), "tf_efficientnet_b0": ({}, 64), "mixnet_s": ({}, 64), "fbnetc_100": ({}, 64),
    "hardcorenas_a": ({}, 64), "gcresnet50t": ({}, 64), "eca_resnet33ts": ({}, 64), "botnet26t_256": ({}, 256),
    "coatnet_0_rw_224": ({}, 224), "maxvit_tiny_rw_224": ({}, 224), "inception_next_tiny": ({}, 64),
    "hgnet_tiny": ({}, 64), "ghostnetv2_100": ({}, 64), "nest_tiny": ({"img_size": 64}, 64),
    "vit_small_patch16_224": ({"img_size": 64}, 64), "eva02_tiny_patch14_224": ({"img_size": 56}, 56),
    "levit_conv_128s": ({"img_size": 64}, 64), "resmlp_12_224": ({"img_size": 64}, 64), "gmlp_ti16_224": ({"img_size": 64}, 64),
}
GRAD_MODELS = {"resnet18", "mobilenet_v2", "vit_b_16", "timm:resnet18", "timm:deit_tiny_patch16_224", "BERT_pytorch"}


def torchvision_cases(big: bool):
    import torchvision

    for name in torchvision.models.list_models(module=torchvision.models):
        if name in BIG and not big:
            continue
        size = IMAGE_SIZE.get(name, 64)
        yield name, (lambda n=name: torchvision.models.get_model(n, weights=None, **TORCHVISION_KWARGS.get(n, {}))), \
            (lambda s=size: (torch.randn(1, 3, s, s),))
    for name in ("fcn_resnet50", "deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large"):
        yield f"seg:{name}", (lambda n=name: torchvision.models.get_model(n, weights=None, weights_backbone=None,
                                                                          num_classes=4)), \
            (lambda: (torch.randn(1, 3, 64, 64),))


def other_torchvision_cases():
    """Video and optical-flow models: other input ranks, lists stored on modules."""
    from torchvision.models import optical_flow, video

    for name, shape in (("r3d_18", (1, 3, 4, 32, 32)), ("r2plus1d_18", (1, 3, 4, 32, 32)),
                        ("swin3d_t", (1, 3, 4, 64, 64))):
        yield f"video:{name}", getattr(video, name), (lambda s=shape: (torch.randn(*s),))
    yield "flow:raft_small", optical_flow.raft_small, \
        (lambda: (torch.randn(1, 3, 128, 128), torch.randn(1, 3, 128, 128), 2))


def timm_cases():
    import timm

    for name, (kwargs, size) in TIMM_MODELS.items():
        yield f"timm:{name}", (lambda n=name, k=kwargs: timm.create_model(n, pretrained=False, **k)), \
            (lambda s=size: (torch.randn(1, 3, s, s),))


def bert_cases():
    def build():
        from bert_pytorch.model import BERT

        return BERT(1000, hidden=64, n_layers=2, attn_heads=4)

    def inputs():
        g = torch.Generator().manual_seed(0)
        return torch.randint(1, 1000, (2, 16), generator=g), torch.randint(0, 2, (2, 16), generator=g)

    yield "BERT_pytorch", build, inputs


def max_diff(a, b) -> float:
    if isinstance(a, torch.Tensor):
        return (a.double() - b.double()).abs().max().item() if a.numel() else 0.0
    if isinstance(a, (tuple, list)):
        return max((max_diff(x, y) for x, y in zip(a, b)), default=0.0)
    if isinstance(a, dict):
        return max((max_diff(a[k], b[k]) for k in a), default=0.0)
    return 0.0 if a == b else float("inf")


def run_one(name, build, inputs, grad: bool) -> str:
    torch.manual_seed(0)
    model = build().eval()
    args = inputs()
    minidynamo.reset()
    start = time.time()
    with torch.set_grad_enabled(grad):
        expected = model(*args)
        report = minidynamo.explain(model)(*args)
    diff = max_diff(report.output, expected)
    reason = report.reasons[0].replace("\n", " ")[:150] if report.reasons else ""
    mode = "grad" if grad else "no_grad"
    return (f"{name:40s} {mode:7s} graphs={report.graph_count:<3d} breaks={report.graph_break_count:<3d} "
            f"fallbacks={report.fallback_count:<3d} "
            f"diff={diff:<9.2e} {time.time() - start:5.1f}s  {reason}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", nargs="*", help="model names (as printed)")
    parser.add_argument("--family", choices=["torchvision", "timm", "bert"], nargs="*")
    parser.add_argument("--grad", action="store_true", help="also one pass with grad for GRAD_MODELS")
    parser.add_argument("--big", action="store_true", help="include the giant variants")
    options = parser.parse_args()
    torch.set_num_threads(1)
    families = options.family or ["torchvision", "timm", "bert"]
    cases = []
    if "torchvision" in families:
        cases += torchvision_cases(options.big)
        cases += other_torchvision_cases()
    if "timm" in families:
        cases += timm_cases()
    if "bert" in families:
        cases += bert_cases()
    totals = {"models": 0, "clean": 0, "graphs": 0, "fallbacks": 0, "errors": 0}
    for name, build, inputs in cases:
        if options.only and name not in options.only:
            continue
        for grad in ([False, True] if options.grad and name in GRAD_MODELS else [False]):
            try:
                line = run_one(name, build, inputs, grad)
                totals["models"] += 1
                totals["clean"] += "fallbacks=0 " in line
            except Exception as e:  # a crash is a bug: show it, keep sweeping
                totals["errors"] += 1
                line = f"{name:40s} ERROR {type(e).__name__}: {str(e)[:200]}"
                if os.environ.get("SWEEP_TRACEBACK"):
                    traceback.print_exc()
            print(line, flush=True)
    print(f"-- {totals['models']} runs, {totals['clean']} without fallback, {totals['errors']} errors", flush=True)


if __name__ == "__main__":
    main()
