#pragma once

/* Part of guards/_tensor_match.cpp: TensorMatch, every tensor of a guard in one native call. */

namespace {

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

/* A tuple of one flag per spec. */
template <typename Flag>
PyObject *spec_flags(PyObject *self_obj, Flag flag) {
    auto *self = reinterpret_cast<TensorMatch *>(self_obj);
    PyObject *flags = PyTuple_New(self->count);
    if (flags == nullptr)
        return nullptr;
    for (Py_ssize_t i = 0; i < self->count; i++)
        PyTuple_SET_ITEM(flags, i, PyBool_FromLong(flag((*self->specs)[i])));
    return flags;
}

PyObject *TensorMatch_direct(PyObject *self_obj, PyObject *) {
    return spec_flags(self_obj, [](const Spec &spec) { return spec.direct; });
}

PyObject *TensorMatch_seen(PyObject *self_obj, PyObject *) {
    return spec_flags(self_obj, [](const Spec &spec) { return spec.seen; });
}

PyMemberDef TensorMatch_members[] = {
    {"count", T_PYSSIZET, offsetof(TensorMatch, count), READONLY, "number of tensors checked"},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(TensorMatch, vectorcall), READONLY, nullptr},
    {nullptr},
};

PyMethodDef TensorMatch_methods[] = {
    {"direct", TensorMatch_direct, METH_NOARGS,
     "direct() -> tuple of bool: per spec, whether its type lets the TensorImpl be read directly"},
    {"seen", TensorMatch_seen, METH_NOARGS,
     "seen() -> tuple of bool: per spec, whether it keeps a passing tensor's words (impl_words.h)"},
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

}  // namespace
