"""torchvision's models beyond classification, tried as a new user would: detection (R-CNNs,
RetinaNet, FCOS, SSD), segmentation, video and the newer classifiers (Swin, MaxViT, ConvNeXt,
EfficientNetV2), built with random weights, called through ``minidynamo.optimize`` and compared
with eager on every call.

    python -m bench.torchvision_sweep                              # eval, no_grad, every model
    python -m bench.torchvision_sweep --train                      # a backward per call (stochastic
                                                                   # depth and dropout at their default
                                                                   # rates; detection models take
                                                                   # targets, their losses are summed)
    python -m bench.torchvision_sweep --only swin_t,maxvit_t --backend torchxla_trace_once
    python -m bench.torchvision_sweep --train --float64 --backend torchxla_trace_once --only googlenet

Per model: whether every call equalled eager (every output tensor, nested in the lists and dicts
detection models return; in --train also every parameter's gradient), graphs compiled
(recompiles among them), graph breaks and fallbacks, and the most frequent reason.  Detection
models break where the work depends on the data (non-maximum suppression, ``torch.where(mask)``):
those breaks are expected.  Their outputs after non-maximum suppression are compared on the eager
backend only: on XLA the scores differ from ATen's in the last bits, and which of two nearly equal
boxes survives, and in which order, flips (plain lazy torch_xla differs from eager the same way),
so ``--backend torchxla_*`` reports them as ``n/a``; in double precision too, since the padding
that batches images of two sizes gives many boxes exactly equal scores, and which of them a
top-k keeps is each implementation's own choice.  (Training compares the losses, made before
any suppression.)  In training, a deep network's batch norms over
a few values each (small inputs) amplify float32 rounding: XLA's gradients and ATen's can differ by
a tenth of their largest element on one call, and plain lazy torch_xla differs from eager as
much; ``--float64`` runs both sides in double precision, where rounding cannot hide a wrong graph
(they agree to about 1e-11).  Both sides draw the same random numbers.  No downloads.  Not a
test: minutes.
"""

from __future__ import annotations

import collections
import re
import time

import torch

from . import sweeps

DETECTION = ("fasterrcnn_mobilenet_v3_large_320_fpn", "maskrcnn_resnet50_fpn", "keypointrcnn_resnet50_fpn",
             "retinanet_resnet50_fpn", "fcos_resnet50_fpn", "ssdlite320_mobilenet_v3_large", "ssd300_vgg16")
SEGMENTATION = ("deeplabv3_mobilenet_v3_large", "fcn_resnet50", "lraspp_mobilenet_v3_large")
VIDEO = ("r3d_18", "s3d", "mvit_v1_b")
CLASSIFIERS = ("swin_t", "swin_v2_t", "maxvit_t", "vit_b_16", "convnext_tiny", "efficientnet_v2_s", "googlenet",
               "inception_v3", "regnet_y_400mf", "mnasnet0_5", "shufflenet_v2_x0_5", "squeezenet1_1")
MODELS = DETECTION + SEGMENTATION + VIDEO + CLASSIFIERS

# input sizes: the smallest each architecture takes (patch grids, windows and pooling need theirs)
IMAGE = {"vit_b_16": 224, "maxvit_t": 224, "inception_v3": 96}
CLIP = {"r3d_18": (4, 32), "s3d": (16, 224), "mvit_v1_b": (16, 224)}


def build(name: str, train: bool, dtype=torch.float32):
    """(model, an argument maker) with random weights, seeded: two builds are equal.  Parameters
    initialized to a constant (zeros, ones, a detection head's prior) get a little noise: equal
    scores would make the order of the boxes that survive non-maximum suppression arbitrary."""
    from torchvision import models

    kind = next(k for k, names in (("detection", DETECTION), ("segmentation", SEGMENTATION), ("video", VIDEO),
                                   ("classifier", CLASSIFIERS)) if name in names)
    space = {"detection": models.detection, "segmentation": models.segmentation, "video": models.video,
             "classifier": models}[kind]
    options = dict(weights=None)
    if kind in ("detection", "segmentation"):
        options.update(weights_backbone=None, num_classes=5)
    if name.startswith(("retinanet", "fcos")):            # a random head scores below the default cut
        options.update(score_thresh=0.005)
    if kind == "segmentation" and not name.startswith("lraspp"):
        options.update(aux_loss=False)
    if kind in ("video", "classifier"):
        options.update(num_classes=10)
    if name in ("googlenet", "inception_v3"):
        options.update(aux_logits=False, init_weights=False)
    torch.manual_seed(0)
    model = getattr(space, name)(**options)
    with torch.no_grad():
        for p in model.parameters():
            if p.numel() > 1 and bool((p == p.flatten()[0]).all()):
                p.add_(torch.randn(p.shape) * 0.01)
    model.train(train).to(dtype)
    if kind == "detection":
        def make():
            images = [torch.rand(3, 96, 128, dtype=dtype), torch.rand(3, 80, 100, dtype=dtype)]
            targets = [_target(name, image) for image in images]
            return (images, targets) if train else (images,)
    elif kind == "video":
        frames, side = CLIP[name]
        def make():
            return (torch.rand(2 if train else 1, 3, frames, side, side, dtype=dtype),)
    else:
        side = IMAGE.get(name, 64)
        def make():
            return (torch.rand(2 if train else 1, 3, side, side, dtype=dtype),)
    return model, make


def _target(name: str, image):
    """One image's ground truth for a detection model in training: two boxes, and the masks or
    keypoints its heads learn."""
    _, height, width = image.shape
    boxes = torch.tensor([[4.0, 6.0, 40.0, 50.0], [20.0, 10.0, width - 5.0, height - 8.0]], dtype=image.dtype)
    target = {"boxes": boxes, "labels": torch.tensor([1, 3])}
    if name.startswith("maskrcnn"):
        masks = torch.zeros(2, height, width, dtype=torch.uint8)
        for mask, (x0, y0, x1, y1) in zip(masks, boxes.int().tolist()):
            mask[y0:y1, x0:x1] = 1
        target["masks"] = masks
    if name.startswith("keypointrcnn"):
        points = torch.rand(2, 17, 3) * torch.tensor([width * 0.5, height * 0.5, 1.0]) + torch.tensor([5.0, 8.0, 1.0])
        points = points.to(image.dtype)
        target["keypoints"] = points.round()
    return target


def _all_close(a, b, floor: float = 0.0) -> bool:
    """Equal up to float32 rounding, through the lists, tuples and dicts models return."""
    if isinstance(a, torch.Tensor):
        if not isinstance(b, torch.Tensor) or a.dtype != b.dtype:
            return False
        return sweeps.close(a.double(), b.to(a.device).double(), floor) if a.is_floating_point() else torch.equal(a, b.to(a.device))
    if isinstance(a, dict):
        return type(a) is type(b) and a.keys() == b.keys() and all(_all_close(a[k], b[k], floor) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_all_close(x, y, floor) for x, y in zip(a, b))
    return a == b


def _loss(output):
    """What --train differentiates: the sum of a detection model's losses, or of the output."""
    if isinstance(output, dict):
        return sum(v.sum() for v in output.values())
    return output.sum()


def run_one(name: str, backend: str, train: bool, calls: int, dtype=torch.float32) -> dict:
    import minidynamo

    reference, make = build(name, train, dtype)
    model, _ = build(name, train, dtype)
    minidynamo.reset()
    compiled = minidynamo.optimize(backend)(model)
    comparable = backend == "eager" or name not in DETECTION or train
    equal, start = True, time.perf_counter()
    with torch.set_grad_enabled(train):
        for call in range(calls):
            torch.manual_seed(1000 + call)
            args = make()
            torch.manual_seed(100 + call)
            expected = reference(*args)
            torch.manual_seed(100 + call)
            got = compiled(*args)
            equal &= not comparable or _all_close(expected, got)
            if train:
                _loss(expected).backward()
                _loss(got).backward()
                grads = [(a.grad, b.grad) for a, b in zip(reference.parameters(), model.parameters())
                         if a.grad is not None or b.grad is not None]
                floor = 1e-6 * max((a.abs().max().item() for a, _ in grads if a is not None), default=0.0)
                equal &= all(a is not None and b is not None and sweeps.close(a, b.to(a.device), floor) for a, b in grads)
    counters = minidynamo.counters
    reasons = collections.Counter(_short(r) for r in list(counters["fallback_reasons"]) + list(counters["break_reasons"]))
    return dict(name=name, equal=bool(equal) if comparable else None, graphs=counters["compiles"],
                recompiles=counters["recompiles"], breaks=len(counters["break_reasons"]),
                fallbacks=len(counters["fallback_reasons"]), seconds=time.perf_counter() - start,
                reason=reasons.most_common(1)[0][0] if reasons else "")


def _short(reason: str) -> str:
    """A reason without its file paths: what the break or fallback was."""
    return re.sub(r"\S*site-packages/", "", reason.split(": ", 1)[-1]).replace("\n", " ")


def main(argv=None) -> None:
    sweeps.run_table(sweeps.parse(argv, __doc__, MODELS), run_one, width=38)


if __name__ == "__main__":
    main()
