from bench.peers import frame_arguments


class Model:
    def forward(self, x, mask=None, causal=False):
        return x

    def everything(self, a, *rest, scale=2, **extra):
        return a


def test_frame_arguments_apply_defaults_like_the_frame_hook_sees_them():
    model = Model()
    assert frame_arguments(Model.forward, (model, 1)) == (model, 1, None, False)
    assert frame_arguments(Model.forward, (model, 1, "m")) == (model, 1, "m", False)


def test_frame_arguments_order_positionals_keyword_only_varargs_varkw():
    model = Model()
    # contracts.md: co_argcount positionals, keyword-only, then the *args tuple, then **kwargs
    assert frame_arguments(Model.everything, (model, 1, 2, 3)) == (model, 1, 2, (2, 3), {})


def test_xla_peers_keep_the_model_on_the_device_and_take_cpu_inputs(tiny_model):
    """Every XLA peer: model on the XLA device, CPU inputs in, CPU outputs out."""
    import torch

    from bench.models import build_model, REGIMES
    from bench.peers import make_peer

    model = build_model(tiny_model, REGIMES["small"], seed=0)
    x = torch.randn(1, 3, 8, 8)
    with torch.no_grad():
        expected = model(x)
        for name in ("xla_lazy", "torchxla_trace_once"):
            peer = make_peer(name, model)
            assert all(p.device.type == "xla" for p in peer.model.parameters()), name
            for _ in range(2):
                out = peer((x.clone(),))
                assert out.device.type == "cpu"
                torch.testing.assert_close(out, expected, atol=1e-4, rtol=1e-4)
    assert all(p.device.type == "cpu" for p in model.parameters())   # the zoo's model untouched
    import minidynamo
    minidynamo.reset()
