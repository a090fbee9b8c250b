/* Tensor guards that read the tensor itself: at::Tensor's sizes, strides, dtype, device and
 * requires_grad, without building a single Python object.
 *
 * The Python check of one tensor (checks.tensor_checks) is
 *
 *     type(x) is T and x.dtype is D and x.device == V and x.shape == S
 *         and x.stride() == R  (or x.is_contiguous())  and x.requires_grad is G
 *
 * Each getter builds a Python object (a torch.Size, a tuple, a torch.device) from the
 * TensorImpl; this module compares the TensorImpl's own fields with the expected values
 * instead: ~13 ns a tensor instead of ~200.  The interface is that of the C helper
 * (_guard_helpers.c), so guards/native.py can pick either:
 *
 *     TensorMatch([(type, dtype, device, sizes, strides, requires_grad[, by_contiguity]), ...])(*tensors)
 *     ArgumentGuard(nargs, [(arg_index, spec), ...], is_grad_enabled | None, grad_enabled[, state_checks])(func, *args)
 *
 * Same answers as the Python check, always.  Reading the TensorImpl gives what the getters give
 * only when nothing in Python stands between them (the "direct" read); whenever something might,
 * this file asks Python exactly what the Python check asks (the "Python" read):
 *  - per type, once: the metadata attributes must be TensorBase's own and attribute lookup the
 *    generic one; a subclass must keep torch's default __torch_function__ (or the disabled one):
 *    the default runs the getter with subclass dispatch off and returns an equal value;
 *  - per call: no torch function mode may be active (a mode sees every getter call);
 *  - per tensor: no Python dispatch key, no symbolic sizes, no instance attribute shadowing the
 *    stride()/is_contiguous() methods; and any C++ error (a sparse tensor's strides, say) means
 *    "ask Python", never "no".
 * A Python error while checking means "does not match", as in the generated guard's try/except.
 */
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/Device.h>
#include <torch/csrc/Dtype.h>

#include <ATen/PythonTorchFunctionTLS.h>
#include <c10/core/GradMode.h>

#include <structmember.h>

#include <cstring>
#include <vector>

namespace {

// ---------------------------------------------------------------------------------- names

PyTypeObject *tensor_base_type;           // torch._C.TensorBase: where the getters live
PyObject *default_torch_function;          // torch.Tensor.__dict__["__torch_function__"]
PyObject *disabled_torch_function;         // torch._C._disabled_torch_function_impl
PyObject *builtin_is_grad_enabled;         // torch._C.is_grad_enabled
PyObject *str_dtype, *str_device, *str_shape, *str_stride, *str_is_contiguous, *str_requires_grad,
    *str_torch_function, *str_layout;
PyObject *torch_strided;                   // torch.strided (is_contiguous() is True for mkldnn too)

// The attributes the Python check reads: data descriptors first (an instance attribute cannot
// hide them), then the two methods (an instance attribute can).
PyObject **metadata_names[] = {&str_dtype, &str_device, &str_shape, &str_requires_grad, &str_layout,
                               &str_stride, &str_is_contiguous};

enum Outcome { NO = 0, YES = 1, ASK_PYTHON = 2 };

// ---------------------------------------------------------------------------------- specs

struct Spec {
    PyObject *type = nullptr;           // the exact type expected
    PyObject *dtype = nullptr;          // a torch.dtype (compared by identity)
    PyObject *device = nullptr;         // a torch.device (compared with ==)
    PyObject *sizes = nullptr;          // tuple of ints
    PyObject *strides = nullptr;        // tuple of ints
    PyObject *requires_grad = nullptr;  // Py_True or Py_False
    bool by_contiguity = false;         // x.is_contiguous() stands for the strides test
    bool direct = false;                // the type allows reading the TensorImpl
    c10::ScalarType scalar_type = c10::ScalarType::Undefined;
    c10::Device device_value{c10::kCPU};
    std::vector<int64_t> sizes_value, strides_value;

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

bool int_tuple(PyObject *tuple, std::vector<int64_t> &out) {
    Py_ssize_t n = PyTuple_GET_SIZE(tuple);
    out.resize(n);
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
    spec.direct = reads_tensor_impl(reinterpret_cast<PyTypeObject *>(type));
    spec.type = Py_NewRef(type);
    spec.dtype = Py_NewRef(dtype);
    spec.device = Py_NewRef(device);
    spec.sizes = Py_NewRef(sizes);
    spec.strides = Py_NewRef(strides);
    spec.requires_grad = Py_NewRef(requires_grad);
    return true;
}

// ---------------------------------------------------------------------------------- checks

bool same_ints(c10::SymIntArrayRef got, const std::vector<int64_t> &expected, bool &symbolic) {
    if (got.size() != expected.size())
        return false;
    for (size_t i = 0; i < got.size(); i++) {
        auto value = got[i].maybe_as_int();
        if (!value) {
            symbolic = true;
            return false;
        }
        if (*value != expected[i])
            return false;
    }
    return true;
}

/* An instance attribute named stride / is_contiguous hides the method from `x.stride()`. */
bool method_shadowed(PyObject *tensor, PyObject *name) {
    PyObject **dict = _PyObject_GetDictPtr(tensor);
    if (dict == nullptr || *dict == nullptr || PyDict_GET_SIZE(*dict) == 0)
        return false;
    return PyDict_GetItemWithError(*dict, name) != nullptr || PyErr_Occurred();
}

/* The TensorImpl's answer, or ASK_PYTHON when a getter might answer differently. */
Outcome match_direct(const Spec &spec, PyObject *tensor) {
    const at::Tensor &t = THPVariable_Unpack(tensor);
    if (!t.defined())
        return ASK_PYTHON;
    const c10::TensorImpl *impl = t.unsafeGetTensorImpl();
    if (impl->is_python_dispatch())
        return ASK_PYTHON;
    if (t.scalar_type() != spec.scalar_type || impl->requires_grad() != (spec.requires_grad == Py_True))
        return NO;
    bool symbolic = false;
    bool same_sizes = same_ints(impl->sym_sizes(), spec.sizes_value, symbolic);
    if (symbolic)
        return ASK_PYTHON;
    if (!same_sizes)
        return NO;
    if (method_shadowed(tensor, spec.by_contiguity ? str_is_contiguous : str_stride))
        return ASK_PYTHON;
    if (spec.by_contiguity) {
        if (!impl->is_contiguous() || impl->layout() != c10::kStrided)   // mkldnn says contiguous too
            return NO;
    } else {
        bool same_strides = same_ints(impl->sym_strides(), spec.strides_value, symbolic);
        if (symbolic)
            return ASK_PYTHON;
        if (!same_strides)
            return NO;
    }
    return impl->device() == spec.device_value ? YES : NO;
}

/* `a == b` as a condition in Python: rich comparison, then truth. 1, 0, or -1 on error. */
int equal(PyObject *got, PyObject *expected) {
    if (got == nullptr)
        return -1;
    PyObject *result = PyObject_RichCompare(got, expected, Py_EQ);
    Py_DECREF(got);
    if (result == nullptr)
        return -1;
    int truth = PyObject_IsTrue(result);
    Py_DECREF(result);
    return truth;
}

int is_same(PyObject *got, PyObject *expected) {
    if (got == nullptr)
        return -1;
    Py_DECREF(got);
    return got == expected;
}

/* Exactly the Python check, attribute by attribute, in its order.  1, 0, or -1 on error. */
int match_python(const Spec &spec, PyObject *tensor) {
    int ok = is_same(PyObject_GetAttr(tensor, str_dtype), spec.dtype);
    if (ok == 1)
        ok = equal(PyObject_GetAttr(tensor, str_device), spec.device);
    if (ok == 1)
        ok = equal(PyObject_GetAttr(tensor, str_shape), spec.sizes);
    if (ok == 1 && spec.by_contiguity) {
        PyObject *contiguous = PyObject_CallMethodNoArgs(tensor, str_is_contiguous);
        ok = contiguous == nullptr ? -1 : PyObject_IsTrue(contiguous);
        Py_XDECREF(contiguous);
        if (ok == 1)
            ok = is_same(PyObject_GetAttr(tensor, str_layout), torch_strided);
    } else if (ok == 1) {
        ok = equal(PyObject_CallMethodNoArgs(tensor, str_stride), spec.strides);
    }
    if (ok == 1)
        ok = is_same(PyObject_GetAttr(tensor, str_requires_grad), spec.requires_grad);
    return ok;
}

/* 1 when `tensor` matches `spec`, else 0 (a Python error counts as a mismatch). */
int spec_matches(const Spec &spec, PyObject *tensor, bool mode_active) {
    if (reinterpret_cast<PyObject *>(Py_TYPE(tensor)) != spec.type)
        return 0;
    if (spec.direct && !mode_active) {
        Outcome outcome = ASK_PYTHON;
        try {
            outcome = match_direct(spec, tensor);
        } catch (...) {   // e.g. strides of a sparse tensor: let Python say what it says
            outcome = ASK_PYTHON;
        }
        if (PyErr_Occurred()) {   // the instance dict could not be read: ask Python
            PyErr_Clear();
            outcome = ASK_PYTHON;
        }
        if (outcome != ASK_PYTHON)
            return outcome == YES;
    }
    int ok = match_python(spec, tensor);
    if (ok < 0) {
        PyErr_Clear();
        return 0;
    }
    return ok;
}

bool all_match(const std::vector<Spec> &specs, PyObject *const *tensors, const Py_ssize_t *index) {
    bool mode_active = at::impl::torch_function_mode_enabled();
    for (size_t i = 0; i < specs.size(); i++) {
        if (!spec_matches(specs[i], tensors[index ? index[i] : i], mode_active))
            return false;
    }
    return true;
}

/* Parse a sequence of specs (each item passed through `spec_of`) into `out`. */
template <typename SpecOf>
bool parse_specs(PyObject *items, const char *what, std::vector<Spec> &out, SpecOf spec_of) {
    PyObject *seq = PySequence_Fast(items, what);
    if (seq == nullptr)
        return false;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    out = std::vector<Spec>(count);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *spec = spec_of(i, PySequence_Fast_GET_ITEM(seq, i));
        if (spec == nullptr || !spec_init(out[i], spec)) {
            Py_DECREF(seq);
            out.clear();
            return false;
        }
    }
    Py_DECREF(seq);
    return true;
}

// ---------------------------------------------------------------------------------- TensorMatch

struct TensorMatch {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    Py_ssize_t count;
    std::vector<Spec> *specs;
};

PyObject *TensorMatch_vectorcall(PyObject *self_obj, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    auto *self = reinterpret_cast<TensorMatch *>(self_obj);
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != self->count || (kwnames != nullptr && PyTuple_GET_SIZE(kwnames) != 0)) {
        PyErr_Format(PyExc_TypeError, "TensorMatch expects %zd tensors, got %zd", self->count, nargs);
        return nullptr;
    }
    return PyBool_FromLong(all_match(*self->specs, args, nullptr));
}

PyObject *TensorMatch_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *items;
    if (!PyArg_ParseTuple(args, "O:TensorMatch", &items))
        return nullptr;
    auto *self = reinterpret_cast<TensorMatch *>(type->tp_alloc(type, 0));
    if (self == nullptr)
        return nullptr;
    self->vectorcall = TensorMatch_vectorcall;
    self->specs = new std::vector<Spec>();
    if (!parse_specs(items, "TensorMatch expects a sequence of specs", *self->specs,
                     [](Py_ssize_t, PyObject *item) { return item; })) {
        Py_DECREF(self);
        return nullptr;
    }
    self->count = static_cast<Py_ssize_t>(self->specs->size());
    return reinterpret_cast<PyObject *>(self);
}

int TensorMatch_traverse(PyObject *self_obj, visitproc visit, void *arg) {
    auto *self = reinterpret_cast<TensorMatch *>(self_obj);
    Py_VISIT(Py_TYPE(self_obj));
    if (self->specs != nullptr) {
        for (Spec &spec : *self->specs)
            if (int found = spec.traverse(visit, arg))
                return found;
    }
    return 0;
}

int TensorMatch_clear(PyObject *self_obj) {
    auto *self = reinterpret_cast<TensorMatch *>(self_obj);
    if (self->specs != nullptr)
        for (Spec &spec : *self->specs)
            spec.clear();
    return 0;
}

void TensorMatch_dealloc(PyObject *self_obj) {
    auto *self = reinterpret_cast<TensorMatch *>(self_obj);
    PyTypeObject *type = Py_TYPE(self_obj);
    PyObject_GC_UnTrack(self_obj);
    delete self->specs;
    self->specs = nullptr;
    type->tp_free(self_obj);
    Py_DECREF(type);
}

PyObject *TensorMatch_direct(PyObject *self_obj, PyObject *unused) {
    auto *self = reinterpret_cast<TensorMatch *>(self_obj);
    PyObject *flags = PyTuple_New(self->count);
    if (flags == nullptr)
        return nullptr;
    for (Py_ssize_t i = 0; i < self->count; i++)
        PyTuple_SET_ITEM(flags, i, PyBool_FromLong((*self->specs)[i].direct));
    return flags;
}

PyMemberDef TensorMatch_members[] = {
    {"count", T_PYSSIZET, offsetof(TensorMatch, count), READONLY, "number of tensors checked"},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(TensorMatch, vectorcall), READONLY, nullptr},
    {nullptr},
};

PyMethodDef TensorMatch_methods[] = {
    {"direct", TensorMatch_direct, METH_NOARGS,
     "direct() -> tuple of bool: per spec, whether its type lets the TensorImpl be read directly"},
    {nullptr},
};

PyType_Slot TensorMatch_slots[] = {
    {Py_tp_doc, const_cast<char *>("TensorMatch(specs)(*tensors) -> bool: every tensor matches its "
                                    "(type, dtype, device, sizes, strides, requires_grad), read in C++")},
    {Py_tp_new, reinterpret_cast<void *>(TensorMatch_new)},
    {Py_tp_call, reinterpret_cast<void *>(PyVectorcall_Call)},
    {Py_tp_traverse, reinterpret_cast<void *>(TensorMatch_traverse)},
    {Py_tp_clear, reinterpret_cast<void *>(TensorMatch_clear)},
    {Py_tp_dealloc, reinterpret_cast<void *>(TensorMatch_dealloc)},
    {Py_tp_members, TensorMatch_members},
    {Py_tp_methods, TensorMatch_methods},
    {0, nullptr},
};

PyType_Spec TensorMatch_spec = {
    "guards._tensor_match.TensorMatch", sizeof(TensorMatch), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL, TensorMatch_slots,
};

// ---------------------------------------------------------------------------------- ArgumentGuard

/* A whole guard function for frames guarded only on tensor arguments and global torch state
 * (the grad mode, and `state_checks`: (fn, expected) pairs holding when fn() is expected),
 * called like the generated one: guard(func, *args) -> bool.  Instances carry a __dict__. */
struct ArgumentGuard {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *dict;
    Py_ssize_t nargs;            // argument slots expected after func
    PyObject *is_grad_enabled;   // the function to ask, or NULL when grad mode is not guarded
    bool read_grad_mode;         // it is torch._C.is_grad_enabled: read GradMode itself
    bool grad_enabled;           // expected grad mode
    PyObject *state_checks;      // tuple of (fn, expected), or NULL
    std::vector<Spec> *specs;
    std::vector<Py_ssize_t> *arg_slot;   // per spec: its index in (func, *args)
};

/* 1 when the grad mode is as expected, 0 when not (an error counts as not). */
int grad_mode_matches(ArgumentGuard *self) {
    if (self->is_grad_enabled == nullptr)
        return 1;
    if (self->read_grad_mode)
        return c10::GradMode::is_enabled() == self->grad_enabled;
    PyObject *enabled = PyObject_Vectorcall(self->is_grad_enabled, nullptr, 0, nullptr);
    if (enabled == nullptr) {
        PyErr_Clear();
        return 0;
    }
    Py_DECREF(enabled);
    return enabled == (self->grad_enabled ? Py_True : Py_False);
}

/* 1 when every (fn, expected) of the tuple has fn() is expected; an error counts as not.
 * (The twin of _guard_helpers.c's: either extension may be the one built.) */
int state_matches(PyObject *checks) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(checks); i++) {
        PyObject *pair = PyTuple_GET_ITEM(checks, i);
        PyObject *got = PyObject_Vectorcall(PyTuple_GET_ITEM(pair, 0), nullptr, 0, nullptr);
        if (got == nullptr) {
            PyErr_Clear();
            return 0;
        }
        Py_DECREF(got);
        if (got != PyTuple_GET_ITEM(pair, 1))
            return 0;
    }
    return 1;
}

bool valid_state_checks(PyObject *checks) {
    bool ok = PyTuple_Check(checks);
    for (Py_ssize_t i = 0; ok && i < PyTuple_GET_SIZE(checks); i++) {
        PyObject *pair = PyTuple_GET_ITEM(checks, i);
        ok = PyTuple_Check(pair) && PyTuple_GET_SIZE(pair) == 2 && PyCallable_Check(PyTuple_GET_ITEM(pair, 0));
    }
    if (!ok)
        PyErr_SetString(PyExc_TypeError, "state_checks must be a tuple of (callable, expected) pairs");
    return ok;
}

PyObject *ArgumentGuard_vectorcall(PyObject *self_obj, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    auto *self = reinterpret_cast<ArgumentGuard *>(self_obj);
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != self->nargs + 1 || (kwnames != nullptr && PyTuple_GET_SIZE(kwnames) != 0)) {
        PyErr_Format(PyExc_TypeError, "guard expects func and %zd argument slots, got %zd values",
                     self->nargs, nargs);
        return nullptr;
    }
    if (!grad_mode_matches(self))
        Py_RETURN_FALSE;
    if (self->state_checks != nullptr && !state_matches(self->state_checks))
        Py_RETURN_FALSE;
    return PyBool_FromLong(all_match(*self->specs, args, self->arg_slot->data()));
}

PyObject *ArgumentGuard_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    Py_ssize_t nargs;
    PyObject *checks, *is_grad_enabled, *grad_enabled, *state_checks = nullptr;
    if (!PyArg_ParseTuple(args, "nOOO|O:ArgumentGuard", &nargs, &checks, &is_grad_enabled, &grad_enabled,
                          &state_checks))
        return nullptr;
    if (state_checks != nullptr && !valid_state_checks(state_checks))
        return nullptr;
    int expected_mode = PyObject_IsTrue(grad_enabled);
    if (expected_mode < 0)
        return nullptr;
    auto *self = reinterpret_cast<ArgumentGuard *>(type->tp_alloc(type, 0));
    if (self == nullptr)
        return nullptr;
    self->vectorcall = ArgumentGuard_vectorcall;
    self->nargs = nargs;
    self->specs = new std::vector<Spec>();
    self->arg_slot = new std::vector<Py_ssize_t>();
    self->state_checks = Py_XNewRef(state_checks);
    if (is_grad_enabled != Py_None) {
        self->is_grad_enabled = Py_NewRef(is_grad_enabled);
        self->read_grad_mode = is_grad_enabled == builtin_is_grad_enabled;
        self->grad_enabled = expected_mode;
    }
    std::vector<Py_ssize_t> &slots = *self->arg_slot;
    auto spec_of = [&slots, nargs](Py_ssize_t i, PyObject *check) -> PyObject * {
        Py_ssize_t index;
        PyObject *spec;
        if (!PyArg_ParseTuple(check, "nO:ArgumentGuard check", &index, &spec))
            return nullptr;
        if (index < 0 || index >= nargs) {
            PyErr_Format(PyExc_IndexError, "ArgumentGuard: argument index %zd out of range", index);
            return nullptr;
        }
        slots.push_back(1 + index);
        return spec;
    };
    if (!parse_specs(checks, "ArgumentGuard expects a sequence of (arg_index, spec)", *self->specs, spec_of)) {
        Py_DECREF(self);
        return nullptr;
    }
    return reinterpret_cast<PyObject *>(self);
}

int ArgumentGuard_traverse(PyObject *self_obj, visitproc visit, void *arg) {
    auto *self = reinterpret_cast<ArgumentGuard *>(self_obj);
    Py_VISIT(Py_TYPE(self_obj));
    Py_VISIT(self->dict);
    Py_VISIT(self->is_grad_enabled);
    Py_VISIT(self->state_checks);
    if (self->specs != nullptr) {
        for (Spec &spec : *self->specs)
            if (int found = spec.traverse(visit, arg))
                return found;
    }
    return 0;
}

int ArgumentGuard_clear(PyObject *self_obj) {
    auto *self = reinterpret_cast<ArgumentGuard *>(self_obj);
    Py_CLEAR(self->dict);
    Py_CLEAR(self->is_grad_enabled);
    Py_CLEAR(self->state_checks);
    if (self->specs != nullptr)
        for (Spec &spec : *self->specs)
            spec.clear();
    return 0;
}

void ArgumentGuard_dealloc(PyObject *self_obj) {
    auto *self = reinterpret_cast<ArgumentGuard *>(self_obj);
    PyTypeObject *type = Py_TYPE(self_obj);
    PyObject_GC_UnTrack(self_obj);
    ArgumentGuard_clear(self_obj);
    delete self->specs;
    delete self->arg_slot;
    self->specs = nullptr;
    self->arg_slot = nullptr;
    type->tp_free(self_obj);
    Py_DECREF(type);
}

PyMemberDef ArgumentGuard_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(ArgumentGuard, vectorcall), READONLY, nullptr},
    {"__dictoffset__", T_PYSSIZET, offsetof(ArgumentGuard, dict), READONLY, nullptr},
    {nullptr},
};

PyType_Slot ArgumentGuard_slots[] = {
    {Py_tp_doc, const_cast<char *>("ArgumentGuard(nargs, [(arg_index, spec)], is_grad_enabled, grad_enabled[, state_checks])"
                                    "(func, *args) -> bool: a guard function made only of argument tensor "
                                    "matches, read in C++")},
    {Py_tp_new, reinterpret_cast<void *>(ArgumentGuard_new)},
    {Py_tp_call, reinterpret_cast<void *>(PyVectorcall_Call)},
    {Py_tp_traverse, reinterpret_cast<void *>(ArgumentGuard_traverse)},
    {Py_tp_clear, reinterpret_cast<void *>(ArgumentGuard_clear)},
    {Py_tp_dealloc, reinterpret_cast<void *>(ArgumentGuard_dealloc)},
    {Py_tp_members, ArgumentGuard_members},
    {Py_tp_getattro, reinterpret_cast<void *>(PyObject_GenericGetAttr)},
    {Py_tp_setattro, reinterpret_cast<void *>(PyObject_GenericSetAttr)},
    {0, nullptr},
};

PyType_Spec ArgumentGuard_spec = {
    "guards._tensor_match.ArgumentGuard", sizeof(ArgumentGuard), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL, ArgumentGuard_slots,
};

// ---------------------------------------------------------------------------------- module

/* torch's objects this file compares against, looked up once. */
bool find_torch_objects() {
    if (THPVariableClass == nullptr) {
        PyErr_SetString(PyExc_ImportError, "guards._tensor_match: import torch first");
        return false;
    }
    PyObject *torch_c = PyImport_ImportModule("torch._C");
    if (torch_c == nullptr)
        return false;
    PyObject *base = PyObject_GetAttrString(torch_c, "TensorBase");
    disabled_torch_function = PyObject_GetAttrString(torch_c, "_disabled_torch_function_impl");
    builtin_is_grad_enabled = PyObject_GetAttrString(torch_c, "is_grad_enabled");
    Py_DECREF(torch_c);
    if (base == nullptr || disabled_torch_function == nullptr || builtin_is_grad_enabled == nullptr ||
        !PyType_Check(base)) {
        Py_XDECREF(base);
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ImportError, "guards._tensor_match: torch._C.TensorBase is not a type");
        return false;
    }
    tensor_base_type = reinterpret_cast<PyTypeObject *>(base);   // kept for the process's life
    const char *spellings[] = {"dtype", "device", "shape", "requires_grad", "stride", "is_contiguous",
                               "__torch_function__", "layout"};
    PyObject **names[] = {&str_dtype, &str_device, &str_shape, &str_requires_grad, &str_stride,
                          &str_is_contiguous, &str_torch_function, &str_layout};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        *names[i] = PyUnicode_InternFromString(spellings[i]);
        if (*names[i] == nullptr)
            return false;
    }
    PyObject *torch_module = PyImport_ImportModule("torch");
    if (torch_module == nullptr)
        return false;
    torch_strided = PyObject_GetAttrString(torch_module, "strided");   // kept for the process's life
    Py_DECREF(torch_module);
    if (torch_strided == nullptr)
        return false;
    default_torch_function = _PyType_Lookup(reinterpret_cast<PyTypeObject *>(THPVariableClass), str_torch_function);
    Py_XINCREF(default_torch_function);
    return true;
}

PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "guards._tensor_match",
    "Tensor guards read from at::Tensor in C++ (optional: guards falls back to C and Python).", -1,
};

}  // namespace

PyMODINIT_FUNC PyInit__tensor_match(void) {
    if (!find_torch_objects())
        return nullptr;
    PyObject *module = PyModule_Create(&module_def);
    if (module == nullptr)
        return nullptr;
    PyObject *tensor_match = PyType_FromSpec(&TensorMatch_spec);
    PyObject *argument_guard = PyType_FromSpec(&ArgumentGuard_spec);
    if (tensor_match == nullptr || argument_guard == nullptr ||
        PyModule_AddObjectRef(module, "TensorMatch", tensor_match) < 0 ||
        PyModule_AddObjectRef(module, "ArgumentGuard", argument_guard) < 0) {
        Py_XDECREF(tensor_match);
        Py_XDECREF(argument_guard);
        Py_DECREF(module);
        return nullptr;
    }
    Py_DECREF(tensor_match);
    Py_DECREF(argument_guard);
    return module;
}
