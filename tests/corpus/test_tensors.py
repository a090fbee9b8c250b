"""Tensor code: operators (arithmetic, comparison, unary, in-place), tensor methods, torch.*,
torch.nn.functional.*, and the shapes of outputs. Each must be one graph."""

import pytest
import torch
import torch.nn.functional as F

from .helpers import check, params, single, tensor


# ---------------------------------------------------------------- operators on tensors

def tensor_arithmetic(x, y):
    return x + y, x - y, x * y, x / y


def tensor_floordiv_mod_pow(x, y):
    return x // y, x % y, x ** 2, 2 ** y


def tensor_matmul_operator(a, b):
    return a @ b


def tensor_reflected_scalars(x):
    return 1 - x, 2 / (x.abs() + 1), 3 * x


def tensor_comparisons(x, y):
    return x < y, x <= y, x > y, x >= y, x == y, x != y


def tensor_unary(x):
    return -x, +x, abs(x)


def bool_tensor_logic(a, b):
    return a & b, a | b, a ^ b, ~a


def int_tensor_shifts(n):
    return n << 1, n >> 1, n * 3


def inplace_on_local(x, y):
    z = x + 0
    z += y
    z *= 2
    z -= 1
    return z


def inplace_add_on_input(x):
    x.add_(1)
    return x


def inplace_operator_on_input(x, y):
    x *= y
    return x.sum()


def inplace_setitem_on_input(x):
    x[0] += 10
    return x * 2


def inplace_then_read_alias(x):
    v = x.view(-1)
    v.mul_(3)
    return x + 1


def broadcast_with_scalar_tensor(x, s):
    return x * s + s


def rebind_then_inplace(x):
    x = x + 1
    x.add_(1)
    return x


def read_before_inplace(x):
    y = x * 2
    x.add_(1)
    return y, x + 0


def inplace_on_aliased_inputs(a, b):
    a.add_(b)
    return b * 1


def inplace_on_base_read_view(base, view):
    base.mul_(2)
    return view + 1


def inplace_then_return_view(x):
    x.sub_(1)
    return x.view(-1)


def dtype_promotion(n, x):
    return n + x, n * 2, n / 2, (n > 3) & (x > 0)


def non_contiguous_input(x):
    return x.contiguous() * 2, x.is_contiguous(), x.stride()


def empty_and_zero_dim_inputs(empty, scalar):
    return empty.sum() + scalar, empty * 2, scalar.dim()


TENSOR_OPERATORS = [
    single(tensor_arithmetic, tensor(3), tensor(3)).then(tensor(2, 3), tensor(3)),
    single(tensor_floordiv_mod_pow, tensor(3), tensor(3).abs() + 1),
    single(tensor_matmul_operator, tensor(2, 3), tensor(3, 4)),
    single(tensor_reflected_scalars, tensor(3)),
    single(tensor_comparisons, tensor(4), tensor(4)),
    single(tensor_unary, tensor(3)),
    single(bool_tensor_logic, tensor(4, dtype=torch.bool), tensor(4, dtype=torch.bool)),
    single(int_tensor_shifts, tensor(4, dtype=torch.int64)),
    single(inplace_on_local, tensor(3), tensor(3)),
    single(inplace_add_on_input, tensor(3)).then(tensor(3, dtype=torch.float64)),
    single(inplace_operator_on_input, tensor(3), tensor(3)),
    single(inplace_setitem_on_input, tensor(3, 2)),
    single(inplace_then_read_alias, tensor(2, 2)),
    single(broadcast_with_scalar_tensor, tensor(2, 3), torch.tensor(0.5)),
    single(rebind_then_inplace, tensor(3)),
    single(read_before_inplace, tensor(3)),
    single(inplace_on_aliased_inputs, *[tensor(3)] * 2).then(tensor(3), tensor(3)),
    single(inplace_on_base_read_view, *(lambda b: (b, b[1]))(tensor(2, 3))),
    single(inplace_then_return_view, tensor(2, 2)),
    single(dtype_promotion, tensor(3, dtype=torch.int64), tensor(3)),
    single(non_contiguous_input, tensor(3, 4).t()).then(tensor(4, 3)),
    single(empty_and_zero_dim_inputs, tensor(0), torch.tensor(2.0)),
]


# ---------------------------------------------------------------- tensor methods

def method_reductions(x):
    return x.sum(), x.mean(dim=1, keepdim=True), x.amax(0), x.norm()


def method_views(x):
    return x.view(-1), x.reshape(3, -1), x.permute(1, 0), x.transpose(0, 1).contiguous()


def method_squeeze_unsqueeze_flatten(x):
    return x.unsqueeze(0).unsqueeze(-1).squeeze(-1), x.flatten()


def method_dtype_conversions(x):
    as_long = x.type_as(torch.ones(1, dtype=torch.int64))
    return x.float().double(), x.int(), x.to(torch.float16), as_long


def method_clamp_and_friends(x):
    return x.clamp(min=0), x.clamp(-0.5, 0.5), x.abs().sqrt(), x.sigmoid().log()


def method_returning_namedtuple(x):
    return x.max(dim=0)


def method_topk_sort_argmax(x):
    values, indices = x.topk(2)
    return values, indices, x.sort(descending=True).values, x.argmax()


def method_split_chunk(x):
    a, b = x.chunk(2)
    parts = x.split([1, 3])
    return a * b, parts


def method_expand_repeat(x):
    return x.expand(3, 4), x.repeat(2, 1)


def method_masked_fill_where(x):
    return x.masked_fill(x < 0, 0.0), x.new_zeros(2), x.new_full((2,), 3.0)


def method_detach_and_softmax(x):
    return x.detach().softmax(-1), x.log_softmax(dim=-1)


def method_cumsum_matmul(x, w):
    return x.cumsum(1).matmul(w)


TENSOR_METHODS = [
    single(method_reductions, tensor(2, 3)),
    single(method_views, tensor(2, 3)),
    single(method_squeeze_unsqueeze_flatten, tensor(2, 3)),
    single(method_dtype_conversions, tensor(3)),
    single(method_clamp_and_friends, tensor(4)),
    single(method_returning_namedtuple, tensor(3, 4)),
    single(method_topk_sort_argmax, tensor(5)),
    single(method_split_chunk, tensor(4)),
    single(method_expand_repeat, tensor(1, 4)),
    single(method_masked_fill_where, tensor(5)),
    single(method_detach_and_softmax, tensor(2, 3)),
    single(method_cumsum_matmul, tensor(2, 3), tensor(3, 2)),
]


# ---------------------------------------------------------------- torch.*

def torch_cat_stack(x, y):
    return torch.cat([x, y]), torch.stack((x, y), dim=1)


def torch_factories(x):
    return x + torch.ones(3), torch.zeros(2, 2), torch.arange(5), torch.full((2,), 7.0)


def torch_like_factories(x):
    return torch.zeros_like(x) + torch.ones_like(x) * 2 + torch.full_like(x, 3.0)


def torch_tensor_constant(x):
    return x * torch.tensor([1.0, 2.0, 3.0])


def torch_where_and_max(x, y):
    return torch.where(x > y, x, y), torch.maximum(x, y), torch.max(x)


def torch_elementwise(x):
    return torch.relu(x), torch.tanh(x), torch.exp(x), torch.log(torch.abs(x) + 1)


def torch_add_with_alpha(x, y):
    return torch.add(x, y, alpha=2), torch.sub(x, y, alpha=0.5)


def torch_einsum_bmm(a, b):
    return torch.einsum("bij,bjk->bik", a, b), torch.bmm(a, b)


def torch_reductions(x):
    return torch.sum(x, dim=0), torch.mean(x), torch.cumsum(x, dim=1), torch.softmax(x, dim=1)


def torch_shape_functions(x):
    return torch.flatten(x), torch.transpose(x, 0, 1), torch.split(x, 1), torch.chunk(x, 3, dim=1)


def torch_no_grad_block(w):
    y = w * 2
    with torch.no_grad():
        z = w * 3
    return y, z


def torch_enable_grad_inside_no_grad(w):
    with torch.no_grad():
        a = w + 1
        with torch.enable_grad():
            b = w + 1
    return a, b


def no_grad_decorated_helper(w):
    @torch.no_grad()
    def doubled(t):
        return t * 2
    return doubled(w), w * 3


def torch_dtype_and_helpers(x):
    return torch.is_tensor(x), torch.numel(x), x.to(torch.get_default_dtype()) * 2


TORCH_FUNCTIONS = [
    single(torch_cat_stack, tensor(3), tensor(3)),
    single(torch_factories, tensor(3)),
    single(torch_like_factories, tensor(2, 2)),
    single(torch_tensor_constant, tensor(3)),
    single(torch_where_and_max, tensor(4), tensor(4)),
    single(torch_elementwise, tensor(4)),
    single(torch_add_with_alpha, tensor(3), tensor(3)),
    single(torch_einsum_bmm, tensor(2, 2, 3), tensor(2, 3, 2)),
    single(torch_reductions, tensor(2, 3)),
    single(torch_shape_functions, tensor(3, 3)),
    single(torch_no_grad_block, tensor(3).requires_grad_()).then(tensor(3)),
    single(torch_enable_grad_inside_no_grad, tensor(3).requires_grad_()),
    single(no_grad_decorated_helper, tensor(3).requires_grad_()),
    single(torch_dtype_and_helpers, tensor(3)),
]


# ---------------------------------------------------------------- torch.nn.functional.*

def functional_activations(x):
    return F.relu(x), F.gelu(x), F.silu(x), F.leaky_relu(x, negative_slope=0.1)


def functional_softmaxes(x):
    return F.softmax(x, dim=-1), F.log_softmax(x, dim=1)


def functional_linear(x, w, b):
    return F.linear(x, w, b)


def functional_conv_and_pool(image, kernel):
    y = F.conv2d(image, kernel, padding=1)
    return F.max_pool2d(y, 2), F.avg_pool2d(y, kernel_size=2)


def functional_norms(x):
    return F.layer_norm(x, (4,)), F.normalize(x, dim=-1)


def functional_batch_norm_eval(x, mean, var):
    return F.batch_norm(x, mean, var, training=False)


def functional_dropout_eval(x):
    return F.dropout(x, p=0.5, training=False)


def functional_pad_interpolate(image):
    return F.pad(image, (1, 1)), F.interpolate(image, scale_factor=2, mode="nearest")


def functional_losses(logits, target, y):
    return F.cross_entropy(logits, target), F.mse_loss(logits, y)


def functional_embedding_one_hot(indices, table):
    return F.embedding(indices, table), F.one_hot(indices, num_classes=10)


NN_FUNCTIONAL = [
    single(functional_activations, tensor(5)),
    single(functional_softmaxes, tensor(2, 3)),
    single(functional_linear, tensor(2, 3), tensor(4, 3), tensor(4)),
    single(functional_conv_and_pool, tensor(1, 2, 4, 4), tensor(3, 2, 3, 3)),
    single(functional_norms, tensor(2, 4)),
    single(functional_batch_norm_eval, tensor(2, 3), tensor(3), tensor(3).abs() + 0.1),
    single(functional_dropout_eval, tensor(3)),
    single(functional_pad_interpolate, tensor(1, 1, 2, 2)),
    single(functional_losses, tensor(2, 3), torch.tensor([0, 2]), tensor(2, 3)),
    single(functional_embedding_one_hot, torch.tensor([1, 3, 9]), tensor(10, 2)),
]


# ---------------------------------------------------------------- outputs

def output_nested_tuple(x):
    return (x + 1, (x * 2, (x - 1,)))


def output_nested_list_and_dict(x):
    return [{"a": x + 1, "b": [x * 2, 3]}, (None, "s")]


def output_dict_int_keys(x):
    return {0: x.sin(), 1: x.cos(), "n": x.numel()}


def output_same_tensor_twice(x):
    y = x + 1
    return y, y, [y]


def output_input_and_result(x):
    return x, x * 2


def output_view_of_input(x):
    return x.view(-1), x[0], x.t()


def output_single_tensor(x):
    return (x * 2).sum(0)


def output_none_after_inplace(x):
    x.mul_(2)


def output_empty_containers(x):
    return x + 1, (), [], {}


def output_python_objects(x):
    return x * 2, torch.relu, torch.float64, range(3), slice(1, 2)


def output_number_types(x, n):
    return x + 1, 2 * 0.5, True + 1, n / 1, n // 1, n > 0


OUTPUTS = [
    single(output_nested_tuple, tensor(2)),
    single(output_nested_list_and_dict, tensor(2)),
    single(output_dict_int_keys, tensor(2)),
    single(output_same_tensor_twice, tensor(2)),
    single(output_input_and_result, tensor(2)),
    single(output_view_of_input, tensor(2, 2)),
    single(output_single_tensor, tensor(2, 2)),
    single(output_none_after_inplace, tensor(2)),
    single(output_empty_containers, tensor(2)),
    single(output_python_objects, tensor(2)),
    single(output_number_types, tensor(2), 3),
]


@pytest.mark.parametrize("case", params(TENSOR_OPERATORS))
def test_tensor_operators(case):
    check(case)


@pytest.mark.parametrize("case", params(TENSOR_METHODS))
def test_tensor_methods(case):
    check(case)


@pytest.mark.parametrize("case", params(TORCH_FUNCTIONS))
def test_torch_functions(case):
    check(case)


@pytest.mark.parametrize("case", params(NN_FUNCTIONAL))
def test_nn_functional(case):
    check(case)


@pytest.mark.parametrize("case", params(OUTPUTS))
def test_outputs(case):
    check(case)
