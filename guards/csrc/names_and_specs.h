#pragma once

/* Part of guards/_tensor_match.cpp (one translation unit; see its overview): the torch objects
 * and interned names the checks compare against, and a tensor's expected metadata as a Spec
 * parsed once from its Python tuple. */

namespace {

PyTypeObject *tensor_base_type;           // torch._C.TensorBase: where the getters live
PyObject *default_torch_function;          // torch.Tensor.__dict__["__torch_function__"]
PyObject *disabled_torch_function;         // torch._C._disabled_torch_function_impl
PyObject *builtin_is_grad_enabled;         // torch._C.is_grad_enabled
PyObject *str_dtype, *str_device, *str_shape, *str_stride, *str_is_contiguous, *str_requires_grad,
    *str_torch_function, *str_layout, *str_values, *str_is_conj, *str_is_neg;
PyObject *torch_strided;                   // torch.strided (is_contiguous() is True for mkldnn too)
PyObject *tensor_stride, *tensor_is_contiguous;   // torch.Tensor.stride, torch.Tensor.is_contiguous
PyObject *tensor_is_conj, *tensor_is_neg;         // torch.Tensor.is_conj, torch.Tensor.is_neg
const void *plain_autograd_meta_vtable;    // the vtable of torch::autograd::AutogradMeta itself

// The attributes the Python check reads (a subclass that redefines one is read through Python).
PyObject **metadata_names[] = {&str_dtype, &str_device, &str_shape, &str_requires_grad, &str_layout,
                               &str_stride, &str_is_contiguous};

enum Outcome { NO = 0, YES = 1, ASK_PYTHON = 2 };

// ---------------------------------------------------------------------------------- specs

constexpr size_t kMaxTailWords = 4;

/* Up to kInlineDims sizes or strides live inside the spec (no pointer to chase while checking);
 * more spill to the heap. */
constexpr size_t kInlineDims = 6;

struct Dims {
    size_t n = 0;
    int64_t inline_values[kInlineDims] = {};
    std::unique_ptr<int64_t[]> spilled;

    const int64_t *data() const { return n <= kInlineDims ? inline_values : spilled.get(); }
    int64_t *resize(size_t count) {
        n = count;
        if (count <= kInlineDims)
            return inline_values;
        spilled.reset(new int64_t[count]);
        return spilled.get();
    }
};

/* The fields the direct check reads come first, so that a spec's check touches one or two cache
 * lines; the Python objects (for the Python read and for traversal) come after. */
struct Spec {
    PyObject *type = nullptr;           // the exact type expected
    c10::ScalarType scalar_type = c10::ScalarType::Undefined;
    bool by_contiguity = false;         // x.is_contiguous() stands for the strides test
    bool requires_grad_value = false;
    bool direct = false;                // the type allows reading the TensorImpl
    c10::Device device_value{c10::kCPU};
    Dims sizes_value, strides_value;
    // The last plain TensorImpl that matched, as the words of its dtype, device, flags and
    // dispatch keys (see impl_words.h): a tensor whose words are these matches but for requires_grad.
    bool seen = false;
    uint64_t seen_tail[kMaxTailWords] = {};
    PyObject *dtype = nullptr;          // a torch.dtype (compared by identity)
    PyObject *device = nullptr;         // a torch.device (compared with ==)
    PyObject *sizes = nullptr;          // tuple of ints
    PyObject *strides = nullptr;        // tuple of ints
    PyObject *requires_grad = nullptr;  // Py_True or Py_False

    Spec() = default;
    Spec(const Spec &) = delete;
    Spec &operator=(const Spec &) = delete;
    ~Spec() { clear(); }

    void clear() {
        Py_CLEAR(type);
        Py_CLEAR(dtype);
        Py_CLEAR(device);
        Py_CLEAR(sizes);
        Py_CLEAR(strides);
        Py_CLEAR(requires_grad);
    }

    int traverse(visitproc visit, void *arg) {
        Py_VISIT(type);
        Py_VISIT(dtype);
        Py_VISIT(device);
        Py_VISIT(sizes);
        Py_VISIT(strides);
        return 0;
    }
};

/* True when `x.attr` on an instance of `type` reads what TensorBase's own attribute reads, for
 * every attribute the check uses (class changes after the check is built are not seen: the
 * guards package assumes classes are not modified after tracing). */
bool reads_tensor_impl(PyTypeObject *type) {
    if (!PyType_IsSubtype(type, tensor_base_type) || type->tp_getattro != tensor_base_type->tp_getattro)
        return false;
    for (PyObject **name : metadata_names) {
        if (_PyType_Lookup(type, *name) != _PyType_Lookup(tensor_base_type, *name))
            return false;
    }
    if (THPVariable_CheckTypeExact(type))   // torch never asks __torch_function__ of these
        return true;
    PyObject *torch_function = _PyType_Lookup(type, str_torch_function);
    return torch_function == default_torch_function || torch_function == disabled_torch_function;
}

bool int_tuple(PyObject *tuple, Dims &dims) {
    Py_ssize_t n = PyTuple_GET_SIZE(tuple);
    int64_t *out = dims.resize(static_cast<size_t>(n));
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(tuple, i);
        if (!PyLong_CheckExact(item)) {
            PyErr_SetString(PyExc_TypeError, "TensorMatch spec: sizes and strides must be tuples of ints");
            return false;
        }
        out[i] = PyLong_AsLongLong(item);
        if (out[i] == -1 && PyErr_Occurred())
            return false;
    }
    return true;
}

bool spec_init(Spec &spec, PyObject *item) {
    PyObject *type, *dtype, *device, *sizes, *strides, *requires_grad;
    int by_contiguity = 0;
    if (!PyArg_ParseTuple(item, "O!OOO!O!O!|p:TensorMatch spec", &PyType_Type, &type, &dtype, &device,
                          &PyTuple_Type, &sizes, &PyTuple_Type, &strides, &PyBool_Type, &requires_grad,
                          &by_contiguity))
        return false;
    if (!THPDtype_Check(dtype) || !THPDevice_Check(device)) {
        PyErr_SetString(PyExc_TypeError, "TensorMatch spec: expected a torch.dtype and a torch.device");
        return false;
    }
    if (!int_tuple(sizes, spec.sizes_value) || !int_tuple(strides, spec.strides_value))
        return false;
    spec.scalar_type = reinterpret_cast<THPDtype *>(dtype)->scalar_type;
    spec.device_value = reinterpret_cast<THPDevice *>(device)->device;
    spec.by_contiguity = by_contiguity;
    spec.requires_grad_value = requires_grad == Py_True;
    spec.direct = reads_tensor_impl(reinterpret_cast<PyTypeObject *>(type));
    spec.type = Py_NewRef(type);
    spec.dtype = Py_NewRef(dtype);
    spec.device = Py_NewRef(device);
    spec.sizes = Py_NewRef(sizes);
    spec.strides = Py_NewRef(strides);
    spec.requires_grad = Py_NewRef(requires_grad);
    return true;
}

}  // namespace
