"""The model zoo: the seed's table, random weights, deterministic inputs, two regimes.

Each entry knows how to build its model (eval mode, weights drawn from a fixed seed, nothing
downloaded) and how to draw inputs of the right shapes for a regime. Libraries are imported
inside the builders, so naming a model costs nothing until it is built.
"""

import dataclasses

import torch


@dataclasses.dataclass(frozen=True)
class Regime:
    """Input sizes. ``standard`` is torchbench's; ``small`` makes XLA execution short, as it is on
    an accelerator, so per-call overhead (guards versus retracing) decides the speedup."""

    name: str
    image_size: int
    seq_len: int


REGIMES = {
    "standard": Regime("standard", image_size=224, seq_len=128),
    "small": Regime("small", image_size=32, seq_len=16),
}

# torchbench's BERT_pytorch: 20000 corpus words plus 5 special tokens; hidden 768, 12 layers, 12 heads.
BERT_VOCAB = 20005


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """How to build one model and draw its inputs."""

    name: str
    build: callable  # (regime) -> nn.Module in eval mode
    make_inputs: callable  # (regime, batch_size, torch.Generator) -> tuple of tensors
    min_image_size: int = 0  # some CNNs shrink a 32x32 image to nothing

    def inputs(self, regime, batch_size, generator):
        return self.make_inputs(regime, batch_size, generator, self.min_image_size)


def _images(regime, batch_size, generator, min_image_size):
    size = max(regime.image_size, min_image_size)
    return (torch.randn(batch_size, 3, size, size, generator=generator),)


def _tokens(regime, batch_size, generator, _min_image_size):
    shape = (batch_size, regime.seq_len)
    tokens = torch.randint(1, BERT_VOCAB, shape, generator=generator)  # 0 is padding
    segments = torch.randint(1, 3, shape, generator=generator)  # sentence A / B
    return tokens, segments


def _torchvision(name):
    def build(_regime):
        import torchvision.models

        return getattr(torchvision.models, name)(weights=None)

    return build


def _bert(_regime):
    from bert_pytorch.model import BERT

    return BERT(BERT_VOCAB, hidden=768, n_layers=12, attn_heads=12)


def _vit(regime):
    import timm

    # built for the regime's image size (2x2 patches at 32x32): the position embedding fits,
    # as in torchbench's fixed-size model, instead of being resampled at every call
    return timm.create_model("vit_small_patch16_224", pretrained=False, img_size=regime.image_size)


def _spec(name, build, make_inputs=_images, **kw):
    return ModelSpec(name, build, make_inputs, **kw)


MODELS = {
    spec.name: spec
    for spec in (
        _spec("resnet18", _torchvision("resnet18")),
        _spec("resnet50", _torchvision("resnet50")),
        _spec("resnext50_32x4d", _torchvision("resnext50_32x4d")),
        _spec("alexnet", _torchvision("alexnet"), min_image_size=64),
        _spec("mobilenet_v2", _torchvision("mobilenet_v2")),
        _spec("mnasnet1_0", _torchvision("mnasnet1_0")),
        _spec("squeezenet1_1", _torchvision("squeezenet1_1")),
        _spec("vgg16", _torchvision("vgg16")),
        _spec("BERT_pytorch", _bert, _tokens),
        _spec("timm_vision_transformer", _vit),
    )
}


def build_model(name, regime, seed):
    """The model ``name`` for ``regime``, weights drawn from ``seed``, eval mode, no gradients."""
    torch.manual_seed(seed)
    model = MODELS[name].build(regime).eval()
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    return model


def make_inputs(name, regime, batch_size, generator):
    return MODELS[name].inputs(regime, batch_size, generator)
