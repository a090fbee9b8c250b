/* Tensor guards that read the tensor itself: at::Tensor's sizes, strides, dtype, device and
 * requires_grad, without building a single Python object.
 *
 * The Python check of one tensor (checks.tensor_checks) is
 *
 *     type(x) is T and x.dtype is D and x.device == V and x.shape == S
 *         and Tensor.stride(x) == R  (or Tensor.is_contiguous(x))  and x.requires_grad is G
 *
 * Each getter builds a Python object (a torch.Size, a tuple, a torch.device) from the
 * TensorImpl; this module compares the TensorImpl's own fields with the expected values
 * instead: ~13 ns a tensor instead of ~200.  FastGuard runs a guard's common path (the steps
 * the dict memo cannot vouch for, then the tensors) without a Python frame:
 *
 *     TensorMatch([(type, dtype, device, sizes, strides, requires_grad[, by_contiguity]), ...])(*tensors)
 *     FastGuard(nargs, pins, memo, n_values, n_registers, program, [(register, spec), ...], fallback)(func, *args)
 *
 * Same answers as the Python check, always.  Reading the TensorImpl gives what the getters give
 * only when nothing in Python stands between them (the "direct" read); whenever something might,
 * this file asks Python exactly what the Python check asks (the "Python" read):
 *  - per type, once: the metadata attributes must be TensorBase's own and attribute lookup the
 *    generic one; a subclass must keep torch's default __torch_function__ (or the disabled one):
 *    the default runs the getter with subclass dispatch off and returns an equal value;
 *  - per call: no torch function mode may be active (a mode sees every getter call);
 *  - per tensor: no Python dispatch key, no symbolic sizes; and any C++ error (a sparse tensor's strides, say) means
 *    "ask Python", never "no".
 * A Python error while checking means "does not match", as in the generated guard's try/except.
 */
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/csrc/Device.h>
#include <torch/csrc/Dtype.h>

#include <ATen/FunctionalTensorWrapper.h>
#include <ATen/PythonTorchFunctionTLS.h>
#include <c10/core/GradMode.h>

#include <structmember.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <typeinfo>
#include <vector>

namespace {

// ---------------------------------------------------------------------------------- names

PyTypeObject *tensor_base_type;           // torch._C.TensorBase: where the getters live
PyObject *default_torch_function;          // torch.Tensor.__dict__["__torch_function__"]
PyObject *disabled_torch_function;         // torch._C._disabled_torch_function_impl
PyObject *builtin_is_grad_enabled;         // torch._C.is_grad_enabled
PyObject *str_dtype, *str_device, *str_shape, *str_stride, *str_is_contiguous, *str_requires_grad,
    *str_torch_function, *str_layout, *str_values;
PyObject *torch_strided;                   // torch.strided (is_contiguous() is True for mkldnn too)
PyObject *tensor_stride, *tensor_is_contiguous;   // torch.Tensor.stride, torch.Tensor.is_contiguous
const void *plain_autograd_meta_vtable;    // the vtable of torch::autograd::AutogradMeta itself

// The attributes the Python check reads (a subclass that redefines one is read through Python).
PyObject **metadata_names[] = {&str_dtype, &str_device, &str_shape, &str_requires_grad, &str_layout,
                               &str_stride, &str_is_contiguous};

enum Outcome { NO = 0, YES = 1, ASK_PYTHON = 2 };

// ---------------------------------------------------------------------------------- specs

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

// ---------------------------------------------------------------------------------- checks

/* `name not in obj.__dict__` as Python answers it: 1, 0, or -1 with an exception (an object
 * without a __dict__ raises AttributeError there; here it answers 0 without one). */
int instance_lacks(PyObject *obj, PyObject *name) {
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
    // 3.11 keeps a managed dict three words before the object and its attribute values (before
    // a dict is made) four words before: neither there, no instance attribute at all.
    if ((Py_TYPE(obj)->tp_flags & Py_TPFLAGS_MANAGED_DICT) && reinterpret_cast<PyObject **>(obj)[-3] == nullptr &&
        reinterpret_cast<void **>(obj)[-4] == nullptr)
        return 1;
#endif
    PyObject **dict = _PyObject_GetDictPtr(obj);
    if (dict == nullptr)
        return PyErr_Occurred() ? -1 : 0;
    if (*dict == nullptr || PyDict_GET_SIZE(*dict) == 0)
        return 1;
    int found = PyDict_Contains(*dict, name);
    return found < 0 ? -1 : !found;
}

inline bool same_ints(c10::IntArrayRef got, const Dims &expected) {
    size_t n = expected.n;
    if (got.size() != n)
        return false;
    const int64_t *a = got.data(), *b = expected.data();
    int64_t differ = 0;   // no early exit: a branch per element costs more than the loads
    for (size_t i = 0; i < n; i++)
        differ |= a[i] ^ b[i];
    return differ == 0;
}

/* impl->requires_grad() without its out-of-line calls in the common case: no autograd meta
 * means False, and a meta whose dynamic type is exactly AutogradMeta (its vtable says so) answers
 * requires_grad_ || grad_fn_, which is that class's own requires_grad().  Any other meta (a
 * view's, which also asks its base) is asked through the virtual call.  `meta` is
 * impl->autograd_meta(), read earlier (see all_match). */
inline bool requires_grad(const c10::TensorImpl *impl, const c10::AutogradMetaInterface *meta) {
    if (meta == nullptr)
        return false;
    if (plain_autograd_meta_vtable != nullptr && *reinterpret_cast<const void *const *>(meta) == plain_autograd_meta_vtable) {
        const auto *plain = static_cast<const torch::autograd::AutogradMeta *>(meta);
        return plain->requires_grad_ || plain->grad_fn_;
    }
    return impl->requires_grad();
}

/* The TensorImpl's answer, or ASK_PYTHON when a getter might answer differently. */
Outcome match_direct(const Spec &spec, PyObject *tensor, const c10::TensorImpl *impl,
                     const c10::AutogradMetaInterface *meta) {
    if (impl->is_python_dispatch() || impl->has_symbolic_sizes_strides())
        return ASK_PYTHON;
    if (impl->dtype().toScalarType() != spec.scalar_type)
        return NO;
    if (requires_grad(impl, meta) != spec.requires_grad_value)
        return NO;
    // A functional wrapper (torch_xla's device tensors; torch knows one by this key) answers
    // sizes, strides and device with the wrapped tensor's, each through a virtual call: ask
    // the wrapped tensor directly (a fifth of a device tensor's check).
    const c10::TensorImpl *shape = impl;
    if (impl->key_set().has(c10::DispatchKey::Functionalize))
        shape = static_cast<const at::FunctionalTensorWrapper *>(impl)->value().unsafeGetTensorImpl();
    if (!same_ints(shape->sizes(), spec.sizes_value))   // a custom-sizes tensor may throw: Python then
        return NO;
    if (spec.by_contiguity) {
        if (!impl->is_contiguous() || impl->layout() != c10::kStrided)   // mkldnn says contiguous too
            return NO;
    } else if (!same_ints(shape->strides(), spec.strides_value)) {
        return NO;
    }
    return shape->device() == spec.device_value ? YES : NO;
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
        PyObject *contiguous = PyObject_CallOneArg(tensor_is_contiguous, tensor);
        ok = contiguous == nullptr ? -1 : PyObject_IsTrue(contiguous);
        Py_XDECREF(contiguous);
        if (ok == 1)
            ok = is_same(PyObject_GetAttr(tensor, str_layout), torch_strided);
    } else if (ok == 1) {
        ok = equal(PyObject_CallOneArg(tensor_stride, tensor), spec.strides);
    }
    if (ok == 1)
        ok = is_same(PyObject_GetAttr(tensor, str_requires_grad), spec.requires_grad);
    return ok;
}

/* 1 when `tensor` matches `spec`, else 0 (a Python error counts as a mismatch).  `impl` is the
 * tensor's TensorImpl when the direct read applies (see direct_impl), else nullptr. */
int spec_matches(const Spec &spec, PyObject *tensor, const c10::TensorImpl *impl,
                 const c10::AutogradMetaInterface *meta) {
    if (reinterpret_cast<PyObject *>(Py_TYPE(tensor)) != spec.type)
        return 0;
    if (impl != nullptr) {
        Outcome outcome = ASK_PYTHON;
        try {
            outcome = match_direct(spec, tensor, impl, meta);
        } catch (...) {   // e.g. strides of a sparse tensor: let Python say what it says
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

/* The TensorImpl to read directly, or nullptr when Python must be asked (wrong type, a type
 * whose getters may differ, an active torch function mode, an undefined tensor). */
inline const c10::TensorImpl *direct_impl(const Spec &spec, PyObject *tensor, bool mode_active) {
    if (!spec.direct || mode_active || reinterpret_cast<PyObject *>(Py_TYPE(tensor)) != spec.type)
        return nullptr;
    const c10::TensorImpl *impl = THPVariable_Unpack(tensor).unsafeGetTensorImpl();
    return impl == c10::UndefinedTensorImpl::singleton() ? nullptr : impl;
}

inline void prefetch_lines(const void *object, size_t bytes) {
    const char *start = static_cast<const char *>(object);
    for (size_t offset = 0; offset < bytes; offset += 64)
        __builtin_prefetch(start + offset);
}

/* Every tensor matches its spec.  The checks are short and the loads are not, so they run in
 * two passes over blocks of tensors: the first finds each tensor's TensorImpl (the objects' loads
 * are independent of one another, so they overlap) and asks for its lines; the second checks,
 * by then reading lines already on their way. */
constexpr size_t kBlock = 32;

bool all_match(const std::vector<Spec> &specs, PyObject *const *tensors, const Py_ssize_t *index) {
    bool mode_active = at::impl::torch_function_mode_enabled();
    size_t n = specs.size();
    auto at = [&](size_t i) { return tensors[index ? index[i] : i]; };
    const c10::TensorImpl *impls[kBlock];
    for (size_t start = 0; start < n; start += kBlock) {
        size_t count = std::min(kBlock, n - start);
        for (size_t k = 0; k < count; k++) {
            const c10::TensorImpl *impl = direct_impl(specs[start + k], at(start + k), mode_active);
            impls[k] = impl;
            if (impl != nullptr)
                prefetch_lines(impl, sizeof(c10::TensorImpl));
        }
        for (size_t k = 0; k < count; k++) {
            const c10::TensorImpl *impl = impls[k];
            if (!spec_matches(specs[start + k], at(start + k), impl, impl != nullptr ? impl->autograd_meta() : nullptr))
                return false;
        }
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

// ---------------------------------------------------------------------------------- FastGuard

/* The common case of a guard function, as one native call: guard(func, *args) -> bool.
 *
 *     FastGuard(nargs, pins, memo, n_values, n_registers, program, tensors, fallback)
 *
 * When every (arg_index, obj) of `pins` has args[arg_index] is obj and `memo` (a DictMemo, or
 * None) says nothing it vouches for changed, the program runs over registers
 * [func, *args, *memo.values, <one per read>] and then the tensors are matched; else the answer
 * is fallback(func, *args) (the generated Python guard, which re-notes the memo), or False when
 * there is no fallback.  The program is the memo's "volatile" steps as data, planned in Python
 * (guards/native.py: fast_guard); ops:
 *     (ATTR, dst, src, name)   dst = src.name            (ITEM, dst, src, key)  dst = src[key]
 *     (BUILTIN, dst, g, b, name)  dst = g[name] if name in g else b[name]
 *     (CONST, dst, obj)        (IS, src, obj)   (TYPE_IS, src, type)   (EQ, src, obj): src == obj
 *     (CALL_IS, fn, obj): fn() is obj   (CALL_EQ, fn, obj): fn() == obj   (CALL_TRUE, fn): fn()
 *     (NOT_IN, key, src): key not in src     (LACKS, src, name): name not in src.__dict__
 *     (SHORTCUT, dst, holder, base, name, (shadow, ...)):
 *         dst = holder[name] if name in holder and name not in shadow and ... else base.name
 * each exactly the Python the generated guard runs for the same step; an Exception while running
 * means False, as in the generated guard's try/except.  Instances carry a __dict__. */
enum Op { ATTR, ITEM, BUILTIN, CONST, IS, TYPE_IS, EQ, CALL_IS, CALL_EQ, CALL_TRUE, NOT_IN, SHORTCUT, LACKS, N_OPS };

constexpr int MAX_SHADOWS = 4;

struct Step {
    int op;
    Py_ssize_t dst = -1, a = -1, b = -1;   // registers
    PyObject *obj = nullptr;               // name, key, constant or callable (owned)
    PyObject *obj2 = nullptr;              // expected value of a call (owned)
    int n_shadows = 0;                     // SHORTCUT: the dicts that must lack the name
    Py_ssize_t shadows[MAX_SHADOWS] = {};
    // ATTR of "__dict__": the last type seen whose `obj.__dict__` is the plain instance dict, and
    // its version tag then (any change to the class or its bases gives it a new tag).
    mutable PyTypeObject *dict_type = nullptr;
    mutable unsigned int dict_type_version = 0;
    // ATTR of a function's or a bound method's own field (`__code__`, `__func__`, ...): which one.
    int builtin_field = -1;
};

/* ---- plain reads: what Python's generic machinery would answer, without its detours ---- */

getter plain_dict_getter;        // the `__dict__` getter of a plain Python class (subtype_dict)
getattrofunc getattr_hook;       // tp_getattro of a Python class that defines __getattr__
PyObject *object_getattribute;   // object.__dict__['__getattribute__']
PyObject *str_dunder_dict, *str_getattribute;

/* True when `obj.__dict__` is PyObject_GenericGetDict(obj) for every instance of `type`: a
 * Python class whose attribute lookup is object's (maybe with a __getattr__, which the found
 * descriptor never reaches), whose `__dict__` is the standard descriptor, and whose only builtin
 * base is object (else that base's own __dict__ would answer). */
bool plain_instance_dict(PyTypeObject *type) {
    if (!(type->tp_flags & Py_TPFLAGS_HEAPTYPE) || plain_dict_getter == nullptr ||
        (type->tp_getattro != PyObject_GenericGetAttr && type->tp_getattro != getattr_hook))
        return false;
    PyTypeObject *base = type;
    while (base != nullptr && (base->tp_flags & Py_TPFLAGS_HEAPTYPE))
        base = base->tp_base;
    if (base != &PyBaseObject_Type || _PyType_Lookup(type, str_getattribute) != object_getattribute)
        return false;
    PyObject *descr = _PyType_Lookup(type, str_dunder_dict);
    return descr != nullptr && Py_TYPE(descr) == &PyGetSetDescr_Type &&
           reinterpret_cast<PyGetSetDescrObject *>(descr)->d_getset->get == plain_dict_getter;
}

/* The fields of a function and of a bound method that a guard reads on every call (a module's
 * `forward.__func__.__code__`, its `__defaults__`): the types are builtin and cannot change, and
 * each name is a data descriptor, which the instance's __dict__ cannot shadow, so the field is
 * what `obj.name` answers (None where the field is empty, as the getters answer). */
enum BuiltinField { CODE, DEFAULTS, KWDEFAULTS, CLOSURE, GLOBALS, FUNC, SELF, N_BUILTIN_FIELDS };
const char *const builtin_field_names[N_BUILTIN_FIELDS] = {
    "__code__", "__defaults__", "__kwdefaults__", "__closure__", "__globals__", "__func__", "__self__"};

int builtin_field_of(PyObject *name) {
    for (int field = 0; field < N_BUILTIN_FIELDS; field++) {
        if (PyUnicode_CompareWithASCIIString(name, builtin_field_names[field]) == 0)
            return field;
    }
    return -1;
}

/* The field's value (borrowed; nullptr when `obj` is not of the type the field belongs to). */
PyObject *builtin_field(int field, PyObject *obj) {
    if (field <= GLOBALS && Py_IS_TYPE(obj, &PyFunction_Type)) {
        auto *function = reinterpret_cast<PyFunctionObject *>(obj);
        PyObject *value = field == CODE ? function->func_code : field == DEFAULTS ? function->func_defaults
                        : field == KWDEFAULTS ? function->func_kwdefaults : field == CLOSURE ? function->func_closure
                        : function->func_globals;
        return value != nullptr ? value : Py_None;
    }
    if (field >= FUNC && Py_IS_TYPE(obj, &PyMethod_Type))
        return field == FUNC ? PyMethod_GET_FUNCTION(obj) : PyMethod_GET_SELF(obj);
    return nullptr;
}

/* obj.name; `obj.__dict__` straight from the instance when its class is plain (cached per step
 * under the class's version tag), and a function's or method's own fields straight from it. */
PyObject *read_attr(const Step &step, PyObject *obj) {
    if (step.builtin_field >= 0) {
        PyObject *value = builtin_field(step.builtin_field, obj);
        if (value != nullptr)
            return Py_NewRef(value);
    }
    if (step.obj == str_dunder_dict) {
        PyTypeObject *type = Py_TYPE(obj);
        if (type == step.dict_type && type->tp_version_tag == step.dict_type_version &&
            (type->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG))
            return PyObject_GenericGetDict(obj, nullptr);
        if (plain_instance_dict(type) && (type->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG)) {
            step.dict_type = type;
            step.dict_type_version = type->tp_version_tag;
            return PyObject_GenericGetDict(obj, nullptr);
        }
    }
    return PyObject_GetAttr(obj, step.obj);
}

/* container[key]: an exact dict and an exact str key ask the dict directly (no code can run). */
PyObject *read_item(PyObject *container, PyObject *key) {
    if (PyDict_CheckExact(container) && PyUnicode_CheckExact(key)) {
        PyObject *found = PyDict_GetItemWithError(container, key);
        if (found != nullptr)
            return Py_NewRef(found);
        if (PyErr_Occurred())
            return nullptr;
    }
    return PyObject_GetItem(container, key);   // and the KeyError it raises
}

int contains(PyObject *container, PyObject *key) {
    return PyDict_CheckExact(container) ? PyDict_Contains(container, key) : PySequence_Contains(container, key);
}

/* What a passing fast path keeps for the HandOff: the call ((func, *args)) the hand-off
 * registers were read for, and their values, as owned references while `full`.  A register the
 * call or the memo's committed values (`given`, a tuple) filled is kept as that call item or tuple
 * item: one reference to the tuple keeps all the values the memo vouches for (a model's parameters,
 * say), so a passing guard does not take one per value.  A register a read filled is kept as its
 * own reference in `read`.  drop() empties the slots before it releases anything: a release may
 * run Python code (a finalizer) that calls this guard again and keeps new values, which must then
 * stay whole. */
struct Kept {
    std::vector<Py_ssize_t> wanted;       // the hand-off registers
    Py_ssize_t n_call, n_given;           // registers [0, n_call): the call; the next n_given: given
    std::vector<size_t> reads;            // the i whose wanted[i] a read filled
    std::vector<PyObject *> read, call;   // read[i]: wanted[i]'s value when a read filled it
    PyObject *given = nullptr;
    std::vector<PyObject *> releasing;    // drop()'s scratch (a nested drop uses its own)
    bool full = false, busy = false;

    Kept(std::vector<Py_ssize_t> registers, Py_ssize_t n_call, Py_ssize_t n_given)
        : wanted(std::move(registers)), n_call(n_call), n_given(n_given), read(wanted.size(), nullptr),
          call(n_call, nullptr) {
        for (size_t i = 0; i < wanted.size(); i++)
            if (wanted[i] >= n_call + n_given)
                reads.push_back(i);
        releasing.reserve(reads.size() + n_call + 1);
    }

    void keep(PyObject *const *regs, PyObject *const *args, PyObject *values) {
        while (full)   // (a finalizer run by the drop may have kept values again)
            drop();
        for (size_t i : reads)
            read[i] = Py_NewRef(regs[wanted[i]]);
        for (Py_ssize_t i = 0; i < n_call; i++)
            call[i] = Py_NewRef(args[i]);
        given = Py_XNewRef(values);
        full = true;
    }

    /* A new reference to wanted[i]'s kept value (a read's own reference moves out). */
    PyObject *take(size_t i) {
        Py_ssize_t r = wanted[i];
        if (r < n_call)
            return Py_NewRef(call[r]);
        if (r < n_call + n_given)
            return Py_NewRef(PyTuple_GET_ITEM(given, r - n_call));
        PyObject *value = read[i];
        read[i] = nullptr;
        return value;
    }

    void drop() {
        if (!full)
            return;
        full = false;
        std::vector<PyObject *> nested;
        std::vector<PyObject *> &out = busy ? nested : releasing;
        out.clear();
        for (size_t i : reads) {
            out.push_back(read[i]);
            read[i] = nullptr;
        }
        out.insert(out.end(), call.begin(), call.end());
        out.push_back(given);
        std::fill(call.begin(), call.end(), nullptr);
        given = nullptr;
        bool outer = !busy;
        busy = true;
        for (PyObject *object : out)
            Py_XDECREF(object);
        if (outer) {
            busy = false;
            releasing.clear();
        }
    }

    int traverse(visitproc visit, void *arg) {
        if (full) {
            for (PyObject *value : read)
                Py_VISIT(value);
            for (PyObject *item : call)
                Py_VISIT(item);
            Py_VISIT(given);
        }
        return 0;
    }
};

struct FastGuard {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *dict;
    Py_ssize_t nargs;                      // argument slots after func
    Py_ssize_t n_values, n_registers;
    PyObject *pins;                        // tuple of (arg_index, obj)
    PyObject *memo, *memo_valid;           // the DictMemo and its bound valid(), or NULL
    PyObject *fallback;                    // callable or NULL
    PyObject *program_source;              // the program as given (for traversal and repr)
    std::vector<Step> *steps;
    std::vector<Spec> *specs;
    std::vector<Py_ssize_t> *tensor_slot;  // per spec: its register
    // Registers beyond the 64 on the C stack, kept from call to call (a guard that passes
    // allocates nothing); `registers_busy` while a call uses them (a nested call, from Python
    // code run by a step, allocates its own).
    std::vector<PyObject *> *registers;
    bool registers_busy;
    std::vector<bool> *filled;             // per register: written by the arguments, values or a read
    // The hand-off (see HandOff): which registers' values a passing fast path keeps, and what it
    // kept last (see Kept); NULL without a hand-off.
    Kept *kept;
};

void drop_kept(FastGuard *self) {
    if (self->kept != nullptr)
        self->kept->drop();
}

/* 1: the call gave exactly `expected` (identity), 0: not, -1: error. */
int call_is(PyObject *fn, PyObject *expected) {
    if (fn == builtin_is_grad_enabled)
        return (c10::GradMode::is_enabled() ? Py_True : Py_False) == expected;
    PyObject *got = PyObject_Vectorcall(fn, nullptr, 0, nullptr);
    if (got == nullptr)
        return -1;
    Py_DECREF(got);
    return got == expected;
}

int truth(PyObject *value) {
    if (value == nullptr)
        return -1;
    int result = PyObject_IsTrue(value);
    Py_DECREF(value);
    return result;
}

/* `holder[name] if name in holder and name not in shadow... else base.name` (a new reference, or
 * nullptr with an exception), evaluated in the order Python evaluates that expression. */
PyObject *shortcut(const Step &step, PyObject **regs) {
    PyObject *holder = regs[step.a], *name = step.obj;
    // Exact dicts and an exact str: no code runs, so the value found first is the one
    // `holder[name]` gives after the shadow tests.
    bool exact = PyDict_CheckExact(holder) && PyUnicode_CheckExact(name);
    for (int i = 0; exact && i < step.n_shadows; i++)
        exact = PyDict_CheckExact(regs[step.shadows[i]]);
    PyObject *found = nullptr;
    int take;
    if (exact) {
        found = PyDict_GetItemWithError(holder, name);
        take = found != nullptr ? 1 : PyErr_Occurred() ? -1 : 0;
    } else {
        take = contains(holder, name);
    }
    for (int i = 0; take == 1 && i < step.n_shadows; i++) {
        int shadowed = contains(regs[step.shadows[i]], name);
        take = shadowed < 0 ? -1 : !shadowed;
    }
    if (take < 0)
        return nullptr;
    if (take)
        return found != nullptr ? Py_NewRef(found) : PyObject_GetItem(holder, name);
    return PyObject_GetAttr(regs[step.b], name);
}

/* 1 when every step holds, 0 when one does not, -1 on error.  Registers it fills are owned. */
int run_program(const std::vector<Step> &steps, PyObject **regs) {
    for (const Step &step : steps) {
        int ok = 1;
        PyObject *value = nullptr;
        switch (step.op) {
        case ATTR:
            value = read_attr(step, regs[step.a]);
            break;
        case ITEM:
            value = read_item(regs[step.a], step.obj);
            break;
        case BUILTIN: {
            int found = PySequence_Contains(regs[step.a], step.obj);
            if (found < 0)
                return -1;
            value = PyObject_GetItem(regs[found ? step.a : step.b], step.obj);
            break;
        }
        case CONST:
            value = Py_NewRef(step.obj);
            break;
        case IS:
            ok = regs[step.a] == step.obj;
            break;
        case TYPE_IS:
            ok = reinterpret_cast<PyObject *>(Py_TYPE(regs[step.a])) == step.obj;
            break;
        case EQ:
            ok = truth(PyObject_RichCompare(regs[step.a], step.obj, Py_EQ));
            break;
        case CALL_IS:
            ok = call_is(step.obj, step.obj2);
            break;
        case CALL_EQ: {
            PyObject *got = PyObject_Vectorcall(step.obj, nullptr, 0, nullptr);
            ok = got == nullptr ? -1 : truth(PyObject_RichCompare(got, step.obj2, Py_EQ));
            Py_XDECREF(got);
            break;
        }
        case CALL_TRUE:
            ok = truth(PyObject_Vectorcall(step.obj, nullptr, 0, nullptr));
            break;
        case NOT_IN: {
            int found = PySequence_Contains(regs[step.a], step.obj);
            ok = found < 0 ? -1 : !found;
            break;
        }
        case SHORTCUT:
            value = shortcut(step, regs);
            break;
        case LACKS:
            ok = instance_lacks(regs[step.a], step.obj);
            break;
        }
        if (step.dst >= 0) {
            if (value == nullptr)
                return -1;
            regs[step.dst] = value;
        }
        if (ok != 1)
            return ok;
    }
    return 1;
}

PyObject *FastGuard_vectorcall(PyObject *self_obj, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    auto *self = reinterpret_cast<FastGuard *>(self_obj);
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != self->nargs + 1 || (kwnames != nullptr && PyTuple_GET_SIZE(kwnames) != 0)) {
        PyErr_Format(PyExc_TypeError, "guard expects func and %zd argument slots, got %zd values",
                     self->nargs, nargs);
        return nullptr;
    }
    bool fast = true;
    for (Py_ssize_t i = 0; fast && i < PyTuple_GET_SIZE(self->pins); i++) {
        PyObject *pin = PyTuple_GET_ITEM(self->pins, i);
        fast = args[1 + PyLong_AsSsize_t(PyTuple_GET_ITEM(pin, 0))] == PyTuple_GET_ITEM(pin, 1);
    }
    PyObject *values = nullptr;
    if (fast && self->memo != nullptr) {
        PyObject *valid = PyObject_Vectorcall(self->memo_valid, nullptr, 0, nullptr);
        if (valid == nullptr)
            return nullptr;
        Py_DECREF(valid);
        fast = valid == Py_True;
        if (fast) {
            values = PyObject_GetAttr(self->memo, str_values);
            if (values == nullptr)
                return nullptr;
            if (!PyTuple_Check(values) || PyTuple_GET_SIZE(values) != self->n_values) {
                Py_DECREF(values);
                fast = false;
            }
        }
    }
    drop_kept(self);   // only a fast path that passes now hands values off
    if (!fast) {
        if (self->fallback == nullptr)
            Py_RETURN_FALSE;
        return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
    }
    PyObject *stack_regs[64];
    std::vector<PyObject *> heap_regs;
    PyObject **regs = stack_regs;
    bool own_registers = false;
    if (self->n_registers > 64 && !self->registers_busy) {
        self->registers_busy = own_registers = true;
        regs = self->registers->data();
    } else if (self->n_registers > 64) {
        heap_regs.resize(self->n_registers);
        regs = heap_regs.data();
    }
    Py_ssize_t first_read = 1 + self->nargs + self->n_values;
    for (Py_ssize_t i = 0; i <= self->nargs; i++)
        regs[i] = args[i];
    for (Py_ssize_t i = 0; i < self->n_values; i++)
        regs[1 + self->nargs + i] = PyTuple_GET_ITEM(values, i);
    for (Py_ssize_t i = first_read; i < self->n_registers; i++)
        regs[i] = nullptr;
    int ok = run_program(*self->steps, regs);
    if (ok == 1)
        ok = all_match(*self->specs, regs, self->tensor_slot->data());
    if (ok == 1 && self->kept != nullptr)   // (kept arrays are reused: a guard that passes allocates nothing)
        self->kept->keep(regs, args, values);
    for (Py_ssize_t i = first_read; i < self->n_registers; i++)
        Py_CLEAR(regs[i]);   // (a release may run a finalizer that calls this guard again)
    if (own_registers)
        self->registers_busy = false;
    Py_XDECREF(values);
    if (ok < 0) {
        if (!PyErr_ExceptionMatches(PyExc_Exception))   // KeyboardInterrupt and the like propagate
            return nullptr;
        PyErr_Clear();
        ok = 0;
    }
    return PyBool_FromLong(ok);
}

/* One op tuple into a Step; registers must lie in [0, n_registers). */
bool parse_step(PyObject *item, Py_ssize_t n_registers, Step &step) {
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) < 2) {
        PyErr_SetString(PyExc_TypeError, "FastGuard: each op is a tuple (op, ...)");
        return false;
    }
    int op = PyLong_AsLong(PyTuple_GET_ITEM(item, 0));
    if (op < 0 || op >= N_OPS) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "FastGuard: unknown op %d", op);
        return false;
    }
    step.op = op;
    Py_ssize_t dst = -1, a = -1, b = -1;
    PyObject *obj = nullptr, *obj2 = nullptr;
    bool parsed;
    switch (op) {
    case ATTR:
    case ITEM:
        parsed = PyArg_ParseTuple(item, "innO", &op, &dst, &a, &obj);
        break;
    case BUILTIN:
        parsed = PyArg_ParseTuple(item, "innnO", &op, &dst, &a, &b, &obj);
        break;
    case CONST:
        parsed = PyArg_ParseTuple(item, "inO", &op, &dst, &obj);
        break;
    case IS:
    case TYPE_IS:
    case EQ:
        parsed = PyArg_ParseTuple(item, "inO", &op, &a, &obj);
        break;
    case CALL_IS:
    case CALL_EQ:
        parsed = PyArg_ParseTuple(item, "iOO", &op, &obj, &obj2);
        break;
    case CALL_TRUE:
        parsed = PyArg_ParseTuple(item, "iO", &op, &obj);
        break;
    case LACKS:
        parsed = PyArg_ParseTuple(item, "inU", &op, &a, &obj);
        break;
    case SHORTCUT: {
        PyObject *shadows;
        parsed = PyArg_ParseTuple(item, "innnUO!", &op, &dst, &a, &b, &obj, &PyTuple_Type, &shadows);
        if (parsed && PyTuple_GET_SIZE(shadows) > MAX_SHADOWS) {
            PyErr_SetString(PyExc_ValueError, "FastGuard: too many shadows");
            return false;
        }
        for (Py_ssize_t i = 0; parsed && i < PyTuple_GET_SIZE(shadows); i++) {
            Py_ssize_t r = PyLong_AsSsize_t(PyTuple_GET_ITEM(shadows, i));
            if (r < 0 || r >= n_registers) {
                if (!PyErr_Occurred())
                    PyErr_Format(PyExc_IndexError, "FastGuard: register %zd out of range", r);
                return false;
            }
            step.shadows[step.n_shadows++] = r;
        }
        break;
    }
    default:   // NOT_IN
        parsed = PyArg_ParseTuple(item, "iOn", &op, &obj, &a);
        break;
    }
    if (!parsed)
        return false;
    for (Py_ssize_t r : {dst, a, b}) {
        if (r < -1 || r >= n_registers) {
            PyErr_Format(PyExc_IndexError, "FastGuard: register %zd out of range", r);
            return false;
        }
    }
    if ((op == ATTR && !PyUnicode_Check(obj)) || ((op == CALL_IS || op == CALL_EQ || op == CALL_TRUE) &&
                                                  !PyCallable_Check(obj))) {
        PyErr_SetString(PyExc_TypeError, "FastGuard: an attribute name must be a str, a call a callable");
        return false;
    }
    step.dst = dst;
    step.a = a;
    step.b = b;
    if ((op == ATTR || op == SHORTCUT) && PyUnicode_CheckExact(obj) &&
        PyUnicode_Compare(obj, str_dunder_dict) == 0)
        obj = str_dunder_dict;   // read_attr recognises the name by identity
    if (op == ATTR && PyUnicode_CheckExact(obj))
        step.builtin_field = builtin_field_of(obj);
    step.obj = Py_XNewRef(obj);
    step.obj2 = Py_XNewRef(obj2);
    return true;
}

void clear_steps(std::vector<Step> *steps) {
    if (steps == nullptr)
        return;
    for (Step &step : *steps) {
        Py_CLEAR(step.obj);
        Py_CLEAR(step.obj2);
    }
}

/* Parse `program` (a tuple of op tuples) into `steps`.  Every register an op reads must be
 * filled before it: the first `n_given` (arguments, the memo's values), then each read in
 * program order (a register read before it is written would be NULL); `filled` says which are
 * at the end. */
bool parse_program(PyObject *program, Py_ssize_t n_registers, Py_ssize_t n_given, std::vector<Step> &steps,
                   std::vector<bool> &filled) {
    filled.assign(n_registers, false);
    for (Py_ssize_t r = 0; r < n_given && r < n_registers; r++)
        filled[r] = true;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(program); i++) {
        Step &step = steps[i];
        if (!parse_step(PyTuple_GET_ITEM(program, i), n_registers, step))
            return false;
        bool reads_empty = (step.a >= 0 && !filled[step.a]) || (step.b >= 0 && !filled[step.b]);
        for (int k = 0; k < step.n_shadows; k++)
            reads_empty = reads_empty || !filled[step.shadows[k]];
        if (reads_empty || (step.dst >= 0 && filled[step.dst])) {
            PyErr_Format(PyExc_ValueError, "FastGuard: op %zd reads an empty register or writes a full one", i);
            return false;
        }
        if (step.dst >= 0)
            filled[step.dst] = true;
    }
    return true;
}

PyObject *FastGuard_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    Py_ssize_t nargs, n_values, n_registers;
    PyObject *pins, *memo, *program, *tensors, *fallback;
    if (!PyArg_ParseTuple(args, "nO!OnnO!OO:FastGuard", &nargs, &PyTuple_Type, &pins, &memo, &n_values,
                          &n_registers, &PyTuple_Type, &program, &tensors, &fallback))
        return nullptr;
    if (n_registers < 1 + nargs + n_values) {
        PyErr_SetString(PyExc_ValueError, "FastGuard: too few registers");
        return nullptr;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(pins); i++) {
        PyObject *pin = PyTuple_GET_ITEM(pins, i);
        Py_ssize_t index;
        PyObject *obj;
        if (!PyTuple_Check(pin) || !PyArg_ParseTuple(pin, "nO", &index, &obj))
            return nullptr;
        if (index < 0 || index >= nargs) {
            PyErr_SetString(PyExc_IndexError, "FastGuard: pin index out of range");
            return nullptr;
        }
    }
    auto *self = reinterpret_cast<FastGuard *>(type->tp_alloc(type, 0));
    if (self == nullptr)
        return nullptr;
    self->vectorcall = FastGuard_vectorcall;
    self->nargs = nargs;
    self->n_values = n_values;
    self->n_registers = n_registers;
    self->pins = Py_NewRef(pins);
    self->program_source = Py_NewRef(program);
    self->steps = new std::vector<Step>(PyTuple_GET_SIZE(program));
    self->specs = new std::vector<Spec>();
    self->tensor_slot = new std::vector<Py_ssize_t>();
    self->registers = new std::vector<PyObject *>(n_registers > 64 ? n_registers : 0, nullptr);
    if (memo != Py_None) {
        self->memo = Py_NewRef(memo);
        self->memo_valid = PyObject_GetAttrString(memo, "valid");
        if (self->memo_valid == nullptr) {
            Py_DECREF(self);
            return nullptr;
        }
    }
    if (fallback != Py_None)
        self->fallback = Py_NewRef(fallback);
    self->filled = new std::vector<bool>();
    std::vector<bool> &filled = *self->filled;
    if (!parse_program(program, n_registers, 1 + nargs + n_values, *self->steps, filled)) {
        Py_DECREF(self);
        return nullptr;
    }
    std::vector<Py_ssize_t> &slots = *self->tensor_slot;
    auto spec_of = [&slots, &filled, n_registers](Py_ssize_t i, PyObject *check) -> PyObject * {
        Py_ssize_t reg;
        PyObject *spec;
        if (!PyArg_ParseTuple(check, "nO:FastGuard tensor", &reg, &spec))
            return nullptr;
        if (reg < 0 || reg >= n_registers || !filled[reg]) {
            PyErr_Format(PyExc_IndexError, "FastGuard: tensor register %zd out of range or empty", reg);
            return nullptr;
        }
        slots.push_back(reg);
        return spec;
    };
    if (!parse_specs(tensors, "FastGuard expects a sequence of (register, spec)", *self->specs, spec_of)) {
        Py_DECREF(self);
        return nullptr;
    }
    return reinterpret_cast<PyObject *>(self);
}

int FastGuard_traverse(PyObject *self_obj, visitproc visit, void *arg) {
    auto *self = reinterpret_cast<FastGuard *>(self_obj);
    Py_VISIT(Py_TYPE(self_obj));
    Py_VISIT(self->dict);
    Py_VISIT(self->pins);
    Py_VISIT(self->memo);
    Py_VISIT(self->memo_valid);
    Py_VISIT(self->fallback);
    Py_VISIT(self->program_source);
    if (self->kept != nullptr)
        if (int found = self->kept->traverse(visit, arg))
            return found;
    if (self->steps != nullptr) {
        for (Step &step : *self->steps) {
            Py_VISIT(step.obj);
            Py_VISIT(step.obj2);
        }
    }
    if (self->specs != nullptr) {
        for (Spec &spec : *self->specs)
            if (int found = spec.traverse(visit, arg))
                return found;
    }
    return 0;
}

int FastGuard_clear(PyObject *self_obj) {
    auto *self = reinterpret_cast<FastGuard *>(self_obj);
    Py_CLEAR(self->dict);
    Py_CLEAR(self->pins);
    Py_CLEAR(self->memo);
    Py_CLEAR(self->memo_valid);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->program_source);
    drop_kept(self);
    clear_steps(self->steps);
    if (self->specs != nullptr)
        for (Spec &spec : *self->specs)
            spec.clear();
    return 0;
}

void FastGuard_dealloc(PyObject *self_obj) {
    auto *self = reinterpret_cast<FastGuard *>(self_obj);
    PyTypeObject *type = Py_TYPE(self_obj);
    PyObject_GC_UnTrack(self_obj);
    FastGuard_clear(self_obj);
    delete self->steps;
    delete self->specs;
    delete self->tensor_slot;
    delete self->registers;
    delete self->filled;
    delete self->kept;
    self->kept = nullptr;
    self->steps = nullptr;
    self->specs = nullptr;
    self->tensor_slot = nullptr;
    self->filled = nullptr;
    type->tp_free(self_obj);
    Py_DECREF(type);
}

PyMemberDef FastGuard_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(FastGuard, vectorcall), READONLY, nullptr},
    {"__dictoffset__", T_PYSSIZET, offsetof(FastGuard, dict), READONLY, nullptr},
    {"program", T_OBJECT, offsetof(FastGuard, program_source), READONLY, "the ops, as given"},
    {"fallback", T_OBJECT, offsetof(FastGuard, fallback), READONLY, "what runs when a pin or the memo fails"},
    {"n_registers", T_PYSSIZET, offsetof(FastGuard, n_registers), READONLY,
     "registers a call uses (beyond 64: kept from call to call)"},
    {nullptr},
};

/* hand_off((register, ...)): from now on a passing fast path keeps those registers' values. */
PyObject *FastGuard_set_hand_off(PyObject *self_obj, PyObject *registers) {
    auto *self = reinterpret_cast<FastGuard *>(self_obj);
    if (!PyTuple_Check(registers)) {
        PyErr_SetString(PyExc_TypeError, "hand_off expects a tuple of registers");
        return nullptr;
    }
    std::vector<Py_ssize_t> wanted;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(registers); i++) {
        Py_ssize_t r = PyLong_AsSsize_t(PyTuple_GET_ITEM(registers, i));
        if (r < 0 || r >= self->n_registers || !(*self->filled)[r]) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_IndexError, "hand_off: register %zd out of range or never written", r);
            return nullptr;
        }
        wanted.push_back(r);
    }
    drop_kept(self);
    delete self->kept;
    self->kept = new Kept(std::move(wanted), 1 + self->nargs, self->n_values);
    Py_RETURN_NONE;
}

PyObject *FastGuard_drop_kept(PyObject *self_obj, PyObject *unused) {
    drop_kept(reinterpret_cast<FastGuard *>(self_obj));
    Py_RETURN_NONE;
}

PyMethodDef FastGuard_methods[] = {
    {"hand_off", FastGuard_set_hand_off, METH_O,
     "hand_off((register, ...)): a passing fast path keeps these registers' values for a HandOff"},
    {"drop_kept", FastGuard_drop_kept, METH_NOARGS, "forget the values kept by the last passing call"},
    {nullptr},
};

PyType_Slot FastGuard_slots[] = {
    {Py_tp_methods, FastGuard_methods},
    {Py_tp_doc, const_cast<char *>("FastGuard(nargs, pins, memo, n_values, n_registers, program, tensors, fallback)"
                                    "(func, *args) -> bool: a guard's common path as one native call")},
    {Py_tp_new, reinterpret_cast<void *>(FastGuard_new)},
    {Py_tp_call, reinterpret_cast<void *>(PyVectorcall_Call)},
    {Py_tp_traverse, reinterpret_cast<void *>(FastGuard_traverse)},
    {Py_tp_clear, reinterpret_cast<void *>(FastGuard_clear)},
    {Py_tp_dealloc, reinterpret_cast<void *>(FastGuard_dealloc)},
    {Py_tp_members, FastGuard_members},
    {Py_tp_getattro, reinterpret_cast<void *>(PyObject_GenericGetAttr)},
    {Py_tp_setattro, reinterpret_cast<void *>(PyObject_GenericSetAttr)},
    {0, nullptr},
};

PyType_Spec FastGuard_spec = {
    "guards._tensor_match.FastGuard", sizeof(FastGuard), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL, FastGuard_slots,
};

// ---------------------------------------------------------------------------------- Reader

/* A graph-input reader as one native call: reader(func, *args) -> [value, ...].
 *
 *     Reader(nargs, n_registers, program, outputs)
 *
 * The program is the generated reader's reads as FastGuard ops (guards/fast_path.py:
 * native_reader), over registers [func, *args, <one per read>]; the answer lists the registers
 * `outputs` names, in order.  It runs right after the guards passed; an exception propagates,
 * as it would from the generated reader.  Instances carry a __dict__. */
struct Reader {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *dict;
    Py_ssize_t nargs, n_registers;
    PyObject *program_source;
    std::vector<Step> *steps;
    std::vector<Py_ssize_t> *outputs;
};

PyObject *Reader_vectorcall(PyObject *self_obj, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    auto *self = reinterpret_cast<Reader *>(self_obj);
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != self->nargs + 1 || (kwnames != nullptr && PyTuple_GET_SIZE(kwnames) != 0)) {
        PyErr_Format(PyExc_TypeError, "reader expects func and %zd argument slots, got %zd values",
                     self->nargs, nargs);
        return nullptr;
    }
    PyObject *stack_regs[128];
    std::vector<PyObject *> heap_regs;
    PyObject **regs = stack_regs;
    if (self->n_registers > 128) {
        heap_regs.resize(self->n_registers);
        regs = heap_regs.data();
    }
    Py_ssize_t first_read = 1 + self->nargs;
    for (Py_ssize_t i = 0; i < first_read; i++)
        regs[i] = args[i];
    for (Py_ssize_t i = first_read; i < self->n_registers; i++)
        regs[i] = nullptr;
    PyObject *values = nullptr;
    if (run_program(*self->steps, regs) == 1) {
        const std::vector<Py_ssize_t> &outputs = *self->outputs;
        values = PyList_New(static_cast<Py_ssize_t>(outputs.size()));
        for (size_t i = 0; values != nullptr && i < outputs.size(); i++)
            PyList_SET_ITEM(values, i, Py_NewRef(regs[outputs[i]]));
    }
    for (Py_ssize_t i = first_read; i < self->n_registers; i++)
        Py_XDECREF(regs[i]);
    if (values == nullptr && !PyErr_Occurred())   // only reads: a step "fails" only by raising
        PyErr_SetString(PyExc_RuntimeError, "reader: a step failed without an exception");
    return values;
}

PyObject *Reader_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    Py_ssize_t nargs, n_registers;
    PyObject *program, *outputs;
    if (!PyArg_ParseTuple(args, "nnO!O!:Reader", &nargs, &n_registers, &PyTuple_Type, &program,
                          &PyTuple_Type, &outputs))
        return nullptr;
    if (nargs < 0 || n_registers < 1 + nargs) {
        PyErr_SetString(PyExc_ValueError, "Reader: too few registers");
        return nullptr;
    }
    auto *self = reinterpret_cast<Reader *>(type->tp_alloc(type, 0));
    if (self == nullptr)
        return nullptr;
    self->vectorcall = Reader_vectorcall;
    self->nargs = nargs;
    self->n_registers = n_registers;
    self->program_source = Py_NewRef(program);
    self->steps = new std::vector<Step>(PyTuple_GET_SIZE(program));
    self->outputs = new std::vector<Py_ssize_t>();
    std::vector<bool> filled;
    if (!parse_program(program, n_registers, 1 + nargs, *self->steps, filled)) {
        Py_DECREF(self);
        return nullptr;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(outputs); i++) {
        Py_ssize_t r = PyLong_AsSsize_t(PyTuple_GET_ITEM(outputs, i));
        if (r < 0 || r >= n_registers || !filled[r]) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_IndexError, "Reader: output register %zd out of range or empty", r);
            Py_DECREF(self);
            return nullptr;
        }
        for (const Step &step : *self->steps)
            if (step.dst == r && step.op != ATTR && step.op != ITEM && step.op != BUILTIN && step.op != CONST &&
                step.op != SHORTCUT) {
                PyErr_SetString(PyExc_ValueError, "Reader: an output must be an argument or a read");
                Py_DECREF(self);
                return nullptr;
            }
        self->outputs->push_back(r);
    }
    for (const Step &step : *self->steps)
        if (step.dst < 0) {
            PyErr_SetString(PyExc_ValueError, "Reader: only reads (a check has no place in a reader)");
            Py_DECREF(self);
            return nullptr;
        }
    return reinterpret_cast<PyObject *>(self);
}

int Reader_traverse(PyObject *self_obj, visitproc visit, void *arg) {
    auto *self = reinterpret_cast<Reader *>(self_obj);
    Py_VISIT(Py_TYPE(self_obj));
    Py_VISIT(self->dict);
    Py_VISIT(self->program_source);
    if (self->steps != nullptr) {
        for (Step &step : *self->steps) {
            Py_VISIT(step.obj);
            Py_VISIT(step.obj2);
        }
    }
    return 0;
}

int Reader_clear(PyObject *self_obj) {
    auto *self = reinterpret_cast<Reader *>(self_obj);
    Py_CLEAR(self->dict);
    Py_CLEAR(self->program_source);
    clear_steps(self->steps);
    return 0;
}

void Reader_dealloc(PyObject *self_obj) {
    auto *self = reinterpret_cast<Reader *>(self_obj);
    PyTypeObject *type = Py_TYPE(self_obj);
    PyObject_GC_UnTrack(self_obj);
    Reader_clear(self_obj);
    delete self->steps;
    delete self->outputs;
    self->steps = nullptr;
    self->outputs = nullptr;
    type->tp_free(self_obj);
    Py_DECREF(type);
}

PyMemberDef Reader_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Reader, vectorcall), READONLY, nullptr},
    {"__dictoffset__", T_PYSSIZET, offsetof(Reader, dict), READONLY, nullptr},
    {"program", T_OBJECT, offsetof(Reader, program_source), READONLY, "the ops, as given"},
    {nullptr},
};

PyType_Slot Reader_slots[] = {
    {Py_tp_doc, const_cast<char *>("Reader(nargs, n_registers, program, outputs)(func, *args) -> list: "
                                    "a generated reader's reads as one native call")},
    {Py_tp_new, reinterpret_cast<void *>(Reader_new)},
    {Py_tp_call, reinterpret_cast<void *>(PyVectorcall_Call)},
    {Py_tp_traverse, reinterpret_cast<void *>(Reader_traverse)},
    {Py_tp_clear, reinterpret_cast<void *>(Reader_clear)},
    {Py_tp_dealloc, reinterpret_cast<void *>(Reader_dealloc)},
    {Py_tp_members, Reader_members},
    {Py_tp_getattro, reinterpret_cast<void *>(PyObject_GenericGetAttr)},
    {Py_tp_setattro, reinterpret_cast<void *>(PyObject_GenericSetAttr)},
    {0, nullptr},
};

PyType_Spec Reader_spec = {
    "guards._tensor_match.Reader", sizeof(Reader), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL, Reader_slots,
};

// ---------------------------------------------------------------------------------- HandOff

/* The guard's reads, handed to the reader: HandOff(guard, reader)(func, *args) -> list.
 *
 * A FastGuard given hand_off(registers) keeps, when its fast path passes, the values of those
 * registers (the graph inputs, which its tensor checks just read) and the call they were read
 * for.  HandOff answers the very next read with them when it is for that same call (func and
 * every argument the same objects), and forgets them either way; any other call asks `reader`.
 * The values are those the guard verified, read moments before: what the reader would read
 * again, minus the reading.  ``handed`` says whether the last answer was the guard's values (so
 * the guard's tensor checks hold for them: a caller may skip repeating those checks). */
struct HandOff {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *dict;
    PyObject *guard;    // a FastGuard
    PyObject *reader;
    char handed;        // the last answer was the guard's values
};

PyTypeObject *fast_guard_type;

PyObject *HandOff_vectorcall(PyObject *self_obj, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    auto *self = reinterpret_cast<HandOff *>(self_obj);
    auto *guard = reinterpret_cast<FastGuard *>(self->guard);
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Kept *kept = guard->kept;
    bool same = kept != nullptr && kept->full && kwnames == nullptr &&
                static_cast<Py_ssize_t>(kept->call.size()) == nargs;
    for (Py_ssize_t i = 0; same && i < nargs; i++)
        same = kept->call[i] == args[i];
    if (same) {
        PyObject *values = PyList_New(static_cast<Py_ssize_t>(kept->wanted.size()));
        if (values == nullptr) {
            kept->drop();
            return nullptr;
        }
        for (size_t i = 0; i < kept->wanted.size(); i++)
            PyList_SET_ITEM(values, i, kept->take(i));
        kept->drop();
        self->handed = 1;
        return values;
    }
    drop_kept(guard);
    self->handed = 0;
    PyObject *read = PyObject_Vectorcall(self->reader, args, nargsf, kwnames);
    self->handed = 0;   // again: another thread's hand-off may have run inside a Python reader
    return read;
}

PyObject *HandOff_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *guard, *reader;
    if (!PyArg_ParseTuple(args, "O!O:HandOff", fast_guard_type, &guard, &reader))
        return nullptr;
    auto *self = reinterpret_cast<HandOff *>(type->tp_alloc(type, 0));
    if (self == nullptr)
        return nullptr;
    self->vectorcall = HandOff_vectorcall;
    self->guard = Py_NewRef(guard);
    self->reader = Py_NewRef(reader);
    return reinterpret_cast<PyObject *>(self);
}

int HandOff_traverse(PyObject *self_obj, visitproc visit, void *arg) {
    auto *self = reinterpret_cast<HandOff *>(self_obj);
    Py_VISIT(Py_TYPE(self_obj));
    Py_VISIT(self->dict);
    Py_VISIT(self->guard);
    Py_VISIT(self->reader);
    return 0;
}

int HandOff_clear(PyObject *self_obj) {
    auto *self = reinterpret_cast<HandOff *>(self_obj);
    Py_CLEAR(self->dict);
    Py_CLEAR(self->guard);
    Py_CLEAR(self->reader);
    return 0;
}

void HandOff_dealloc(PyObject *self_obj) {
    PyTypeObject *type = Py_TYPE(self_obj);
    PyObject_GC_UnTrack(self_obj);
    HandOff_clear(self_obj);
    type->tp_free(self_obj);
    Py_DECREF(type);
}

PyMemberDef HandOff_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(HandOff, vectorcall), READONLY, nullptr},
    {"__dictoffset__", T_PYSSIZET, offsetof(HandOff, dict), READONLY, nullptr},
    {"guard", T_OBJECT, offsetof(HandOff, guard), READONLY, "the FastGuard whose reads are handed off"},
    {"reader", T_OBJECT, offsetof(HandOff, reader), READONLY, "what reads when nothing was handed off"},
    {"handed", T_BOOL, offsetof(HandOff, handed), READONLY,
     "whether the last answer was the values the guard's passing fast path checked"},
    {nullptr},
};

PyType_Slot HandOff_slots[] = {
    {Py_tp_doc, const_cast<char *>("HandOff(guard, reader)(func, *args) -> list: the graph inputs the guard "
                                    "just read for this very call, else reader(func, *args)")},
    {Py_tp_new, reinterpret_cast<void *>(HandOff_new)},
    {Py_tp_call, reinterpret_cast<void *>(PyVectorcall_Call)},
    {Py_tp_traverse, reinterpret_cast<void *>(HandOff_traverse)},
    {Py_tp_clear, reinterpret_cast<void *>(HandOff_clear)},
    {Py_tp_dealloc, reinterpret_cast<void *>(HandOff_dealloc)},
    {Py_tp_members, HandOff_members},
    {Py_tp_getattro, reinterpret_cast<void *>(PyObject_GenericGetAttr)},
    {Py_tp_setattro, reinterpret_cast<void *>(PyObject_GenericSetAttr)},
    {0, nullptr},
};

PyType_Spec HandOff_spec = {
    "guards._tensor_match.HandOff", sizeof(HandOff), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL, HandOff_slots,
};

// ---------------------------------------------------------------------------------- module

/* What a plain Python class's attribute machinery is made of, from two probe classes. */
bool find_plain_class_objects() {
    str_dunder_dict = PyUnicode_InternFromString("__dict__");
    str_getattribute = PyUnicode_InternFromString("__getattribute__");
    if (str_dunder_dict == nullptr || str_getattribute == nullptr)
        return false;
    object_getattribute = _PyType_Lookup(&PyBaseObject_Type, str_getattribute);
    PyObject *globals = PyDict_New();
    if (globals == nullptr || PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins()) < 0)
        return false;
    PyObject *done = PyRun_String("class Plain: pass\nclass Hooked:\n    def __getattr__(self, name): raise AttributeError(name)\n",
                                  Py_file_input, globals, globals);
    PyObject *plain = done ? PyDict_GetItemString(globals, "Plain") : nullptr;
    PyObject *hooked = done ? PyDict_GetItemString(globals, "Hooked") : nullptr;
    if (plain != nullptr && hooked != nullptr && PyType_Check(plain) && PyType_Check(hooked)) {
        PyObject *descr = _PyType_Lookup(reinterpret_cast<PyTypeObject *>(plain), str_dunder_dict);
        if (descr != nullptr && Py_TYPE(descr) == &PyGetSetDescr_Type)
            plain_dict_getter = reinterpret_cast<PyGetSetDescrObject *>(descr)->d_getset->get;
        getattr_hook = reinterpret_cast<PyTypeObject *>(hooked)->tp_getattro;
    }
    Py_XDECREF(done);
    Py_DECREF(globals);   // the probe classes go; the function pointers stay valid (they are CPython's)
    PyErr_Clear();
    return true;
}

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
                               "__torch_function__", "layout", "values"};
    PyObject **names[] = {&str_dtype, &str_device, &str_shape, &str_requires_grad, &str_stride,
                          &str_is_contiguous, &str_torch_function, &str_layout, &str_values};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        *names[i] = PyUnicode_InternFromString(spellings[i]);
        if (*names[i] == nullptr)
            return false;
    }
    PyObject *torch_module = PyImport_ImportModule("torch");
    if (torch_module == nullptr)
        return false;
    torch_strided = PyObject_GetAttrString(torch_module, "strided");   // kept for the process's life
    if (torch_strided == nullptr) {
        Py_DECREF(torch_module);
        return false;
    }
    default_torch_function = _PyType_Lookup(reinterpret_cast<PyTypeObject *>(THPVariableClass), str_torch_function);
    // torch.Tensor's own stride / is_contiguous (the Python check calls these, not x.stride()).
    tensor_stride = _PyType_Lookup(tensor_base_type, str_stride);
    tensor_is_contiguous = _PyType_Lookup(tensor_base_type, str_is_contiguous);
    if (tensor_stride == nullptr || tensor_is_contiguous == nullptr) {
        Py_DECREF(torch_module);
        PyErr_SetString(PyExc_ImportError, "guards._tensor_match: torch._C.TensorBase lacks stride / is_contiguous");
        return false;
    }
    Py_INCREF(tensor_stride);          // kept for the process's life
    Py_INCREF(tensor_is_contiguous);
    // A leaf that requires grad has a plain AutogradMeta: remember its vtable (else never inline).
    PyObject *leaf = PyObject_CallMethod(torch_module, "ones", "i", 1);
    PyObject *marked = leaf == nullptr ? nullptr : PyObject_CallMethod(leaf, "requires_grad_", nullptr);
    if (marked != nullptr && THPVariable_Check(marked)) {
        const c10::AutogradMetaInterface *meta = THPVariable_Unpack(marked).unsafeGetTensorImpl()->autograd_meta();
        if (meta != nullptr && typeid(*meta) == typeid(torch::autograd::AutogradMeta))
            plain_autograd_meta_vtable = *reinterpret_cast<const void *const *>(meta);
    }
    Py_XDECREF(marked);
    Py_XDECREF(leaf);
    Py_DECREF(torch_module);
    PyErr_Clear();
    Py_XINCREF(default_torch_function);
    return find_plain_class_objects();
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
    PyObject *fast_guard = PyType_FromSpec(&FastGuard_spec);
    PyObject *reader = PyType_FromSpec(&Reader_spec);
    PyObject *hand_off = PyType_FromSpec(&HandOff_spec);
    if (tensor_match == nullptr || fast_guard == nullptr || reader == nullptr || hand_off == nullptr ||
        PyModule_AddObjectRef(module, "TensorMatch", tensor_match) < 0 ||
        PyModule_AddObjectRef(module, "FastGuard", fast_guard) < 0 ||
        PyModule_AddObjectRef(module, "Reader", reader) < 0 ||
        PyModule_AddObjectRef(module, "HandOff", hand_off) < 0) {
        Py_XDECREF(tensor_match);
        Py_XDECREF(fast_guard);
        Py_XDECREF(reader);
        Py_XDECREF(hand_off);
        Py_DECREF(module);
        return nullptr;
    }
    fast_guard_type = reinterpret_cast<PyTypeObject *>(fast_guard);   // the module keeps it
    Py_DECREF(tensor_match);
    Py_DECREF(fast_guard);
    Py_DECREF(reader);
    Py_DECREF(hand_off);
    return module;
}
