#pragma once

/* Part of guards/_tensor_match.cpp: one tensor against its Spec, read from the TensorImpl when
 * nothing in Python stands between the getters and the impl ("direct"), else asked of Python
 * exactly as the generated check asks ("Python"). */

namespace {

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

/* A wrapped impl's sizes, strides and contiguity (see xla_impl.h): torch_xla 2.9's device
 * tensor answers from its own fields where they are current, else (and any other wrapped impl)
 * through the virtual getters.  Strides are asked right after sizes: the sizes' refresh made them
 * current too. */
c10::IntArrayRef wrapped_sizes(const c10::TensorImpl *shape) {
    if (is_xla_impl(shape) && xla_sizes_current(shape))
        return ImplFields::default_sizes(shape);
    return shape->sizes();
}

c10::IntArrayRef wrapped_strides(const c10::TensorImpl *shape) {
    return is_xla_impl(shape) ? ImplFields::default_strides(shape) : shape->strides();
}

bool wrapped_contiguous(const c10::TensorImpl *shape) {
    return is_xla_impl(shape) || shape->is_contiguous();      // (torch_xla 2.9: always contiguous)
}

/* The TensorImpl's answer, field by field, or ASK_PYTHON when a getter might answer differently. */
Outcome match_fields(const Spec &spec, const c10::TensorImpl *impl, const c10::AutogradMetaInterface *meta) {
    if (impl->is_python_dispatch() || impl->has_symbolic_sizes_strides())
        return ASK_PYTHON;
    if (impl->dtype().toScalarType() != spec.scalar_type || impl->is_conj() || impl->is_neg())
        return NO;
    if (requires_grad(impl, meta) != spec.requires_grad_value)
        return NO;
    const c10::TensorImpl *shape = is_wrapper(impl) ? shape_of(impl) : impl;
    bool wrapped = shape != impl;
    // (a custom-sizes tensor may throw: Python is asked then)
    if (!same_ints(wrapped ? wrapped_sizes(shape) : shape->sizes(), spec.sizes_value))
        return NO;
    if (spec.by_contiguity) {
        // (the layout is the wrapper's own: mkldnn says contiguous too)
        if (!(wrapped ? wrapped_contiguous(shape) : shape->is_contiguous()) || impl->layout() != c10::kStrided)
            return NO;
    } else if (!same_ints(wrapped ? wrapped_strides(shape) : shape->strides(), spec.strides_value)) {
        return NO;
    }
    return shape->device() == spec.device_value ? YES : NO;
}

/* The TensorImpl's answer, or ASK_PYTHON when a getter might answer differently: the kept words
 * when they stand for the fields (impl_words.h), else the fields, keeping the words of a pass. */
Outcome match_direct(Spec &spec, const c10::TensorImpl *impl, const c10::AutogradMetaInterface *meta) {
    if (spec.seen && seen_before(spec, impl))
        return requires_grad(impl, meta) == spec.requires_grad_value ? YES : NO;
    Outcome outcome = match_fields(spec, impl, meta);
    if (outcome == YES && words_apply(impl))
        keep_tail(spec, impl);
    return outcome;
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
    if (ok == 1)
        ok = is_same(PyObject_CallOneArg(tensor_is_conj, tensor), Py_False);
    if (ok == 1)
        ok = is_same(PyObject_CallOneArg(tensor_is_neg, tensor), Py_False);
    return ok;
}

/* 1 when `tensor` matches `spec`, else 0 (a Python error counts as a mismatch).  `impl` is the
 * tensor's TensorImpl when the direct read applies (see direct_impl), else nullptr.  `asked_python`
 * is set when Python was asked (its code may have changed any tensor). */
int spec_matches(Spec &spec, PyObject *tensor, const c10::TensorImpl *impl,
                 const c10::AutogradMetaInterface *meta, bool &asked_python) {
    if (reinterpret_cast<PyObject *>(Py_TYPE(tensor)) != spec.type)
        return 0;
    if (impl != nullptr) {
        Outcome outcome = ASK_PYTHON;
        try {
            outcome = match_direct(spec, impl, meta);
        } catch (...) {   // e.g. strides of a sparse tensor: let Python say what it says
            outcome = ASK_PYTHON;
        }
        if (outcome != ASK_PYTHON)
            return outcome == YES;
    }
    asked_python = true;
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

/* Ask for the lines requires_grad() reads of a plain meta: its vtable and requires_grad_ (only
 * addresses are computed here: a prefetch reads nothing and cannot fault). */
inline void prefetch_meta(const c10::AutogradMetaInterface *meta) {
    __builtin_prefetch(meta);
    __builtin_prefetch(&static_cast<const torch::autograd::AutogradMeta *>(meta)->requires_grad_);
}

/* Every tensor matches its spec.  The checks are short and the loads are not: each hangs off the
 * one before (Python object -> TensorImpl -> autograd meta, or a wrapper's wrapped impl).  So
 * they run in three passes over blocks of tensors: the first finds each tensor's TensorImpl and
 * asks for its lines, the second reads each impl's meta and wrapped impl and asks for their
 * lines, the third checks, reading lines already on their way.  Within a pass the tensors' loads
 * are independent of one another, so they overlap. */
constexpr size_t kBlock = 32;

bool all_match(std::vector<Spec> &specs, PyObject *const *tensors, const Py_ssize_t *index) {
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
        const c10::AutogradMetaInterface *metas[kBlock];
        for (size_t k = 0; k < count; k++) {
            metas[k] = impls[k] != nullptr ? autograd_meta_of(impls[k]) : nullptr;
            if (metas[k] != nullptr)
                prefetch_meta(metas[k]);
            // A wrapper's wrapped impl, with the line after its base (a subclass's own fields:
            // torch_xla's lazy tensor and generation).  The check reads the pointer again (Python
            // asked about an earlier tensor may have replaced it): a prefetch cannot fault.
            if (impls[k] != nullptr && is_wrapper(impls[k]))
                prefetch_lines(shape_of(impls[k]), sizeof(c10::TensorImpl) + 64);
        }
        // A device tensor's generations, a line at a time along the lazy tensor's chain.
        for (int step = 0; step < 2 && xla_layout.fields; step++) {
            for (size_t k = 0; k < count; k++) {
                if (impls[k] != nullptr && is_wrapper(impls[k]))
                    prefetch_generation(shape_of(impls[k]), step);
            }
        }
        bool asked_python = false;
        for (size_t k = 0; k < count; k++) {
            if (asked_python) {   // the reads ahead may be stale now: read this tensor afresh
                mode_active = at::impl::torch_function_mode_enabled();
                impls[k] = direct_impl(specs[start + k], at(start + k), mode_active);
                metas[k] = impls[k] != nullptr ? autograd_meta_of(impls[k]) : nullptr;
            }
            if (!spec_matches(specs[start + k], at(start + k), impls[k], metas[k], asked_python))
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

}  // namespace
