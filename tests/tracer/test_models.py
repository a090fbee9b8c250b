"""The seed's ten models, small: each captured as exactly ONE graph (trace_frame either returns
one graph or raises Unsupported) and equal to eager.  Random weights, eval mode, batch 1."""

import sys

import pytest
import torch

from minidynamo.exc import Unsupported

from .helpers import run_traced

TORCHVISION = ["resnet18", "resnet50", "resnext50_32x4d", "alexnet", "mobilenet_v2", "mnasnet1_0",
               "squeezenet1_1", "vgg16"]


def assert_matches_eager(model, *inputs):
    capture, got = run_traced(model, *inputs)
    with torch.no_grad():
        expected = model(*inputs)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    ops = [n for n in capture.graph_module.graph.nodes if n.op in ("call_function", "call_method")]
    assert ops, "the graph must hold the model's operations"
    assert not any(n.op == "call_module" for n in capture.graph_module.graph.nodes)
    return capture


@pytest.mark.parametrize("name", TORCHVISION)
def test_torchvision_model(name):
    import torchvision

    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None).eval()
    capture = assert_matches_eager(model, torch.randn(1, 3, 64, 64))
    inputs = {id(t) for t in capture.example_inputs}
    assert all(id(p) in inputs for p in model.parameters())   # weights are graph inputs, not constants


def test_timm_vit_small():
    import timm

    torch.manual_seed(0)
    model = timm.create_model("vit_small_patch16_224", pretrained=False, img_size=32, patch_size=8,
                              depth=2).eval()
    assert_matches_eager(model, torch.randn(1, 3, 32, 32))


def test_bert_pytorch_small():
    from bert_pytorch.model import BERT

    torch.manual_seed(0)
    model = BERT(vocab_size=100, hidden=64, n_layers=2, attn_heads=4).eval()
    tokens = torch.randint(1, 100, (1, 16))
    tokens[0, -4:] = 0                              # padding: exercises the (x > 0) mask
    segments = torch.randint(0, 3, (1, 16))
    assert_matches_eager(model, tokens, segments)


def test_weights_are_read_at_call_time():
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(1, 3, 32, 32)
    capture, _ = run_traced(model, x)
    with torch.no_grad():
        model.fc.weight.mul_(2)                     # an in-place update after tracing
        expected = model(x)
    from guards import compile_reader

    func = type(model).forward
    inputs = compile_reader(capture.input_sources, capture.frame)(func, model, x)
    got = capture.build_output(capture.graph_module(*inputs), func, model, x)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)


def test_training_flag_is_guarded():
    from guards import build_guard_function

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5)).eval()
    capture, _ = run_traced(model, torch.randn(2, 4))
    guard_fn = build_guard_function(capture.guards, capture.frame)
    func = type(model).forward
    x = torch.randn(2, 4)
    assert guard_fn(func, model, x)
    model.train()
    assert not guard_fn(func, model, x)


def test_backward_hooks_are_refused():
    model = torch.nn.Linear(4, 4)
    model.register_full_backward_hook(lambda m, gi, go: None)
    wrapper = torch.nn.Sequential(model)
    with pytest.raises(Unsupported, match="backward hooks"):
        run_traced(wrapper, torch.randn(2, 4))


def test_no_torch_dynamo_after_tracing_bert():
    """torchvision and timm import torch._dynamo themselves; BERT does not, so a fresh process
    shows whether minidynamo's trace (meta kernels included) loads it."""
    import subprocess

    script = (
        "import sys, torch, minidynamo\n"
        "from bert_pytorch.model import BERT\n"
        "from minidynamo.tracer import trace_frame\n"
        "m = BERT(vocab_size=50, hidden=32, n_layers=1, attn_heads=2).eval()\n"
        "t = torch.randint(0, 50, (1, 8))\n"
        "trace_frame(type(m).forward, (m, t, torch.zeros_like(t)))\n"
        "print(sorted(k for k in sys.modules if k.startswith('torch._dynamo')))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_training_mode_updates_buffers_like_eager():
    import copy

    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).train()
    twin = copy.deepcopy(model)
    x = torch.randn(2, 3, 32, 32)
    _, got = run_traced(model, x)          # the graph runs batch_norm with training=True
    expected = twin(x)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    for (name, a), b in zip(model.named_buffers(), twin.buffers()):
        torch.testing.assert_close(a, b, msg=name)
