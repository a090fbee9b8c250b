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
