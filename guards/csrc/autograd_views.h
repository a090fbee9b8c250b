#pragma once

/* Part of guards/_tensor_match.cpp: what kind of view, for autograd, each tensor is
 * (guards.autograd_views_match).
 *
 *     AutogradViews(kinds, autograd_view)(*tensors) -> bool
 *
 * answers as guards.guard.PyAutogradViews: each tensor's `autograd_view(tensor)` equals its
 * entry of `kinds`.  A tensor without an autograd meta, or whose meta is exactly a plain
 * AutogradMeta (its vtable says so), is no view: its kind is `()` without a call.  Any other
 * meta (a view's DifferentiableViewMeta) is asked of `autograd_view` in Python; views written
 * in place are rare, buffers that a graph updates every call (batch norm's running stats) are
 * not, and they are plain. */

namespace {

struct AutogradViews {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *kinds;           // a tuple: one kind per tensor
    PyObject *autograd_view;   // guards.guard.autograd_view
};

/* 1: `tensor`'s meta says it is no view; 0: it may be one (ask Python). */
inline int plainly_no_view(PyObject *tensor) {
    const c10::TensorImpl *impl = THPVariable_Unpack(tensor).unsafeGetTensorImpl();
    const c10::AutogradMetaInterface *meta = impl->autograd_meta();
    return meta == nullptr ||
           (plain_autograd_meta_vtable != nullptr && *reinterpret_cast<const void *const *>(meta) == plain_autograd_meta_vtable);
}

PyObject *AutogradViews_vectorcall(PyObject *self_obj, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    auto *self = reinterpret_cast<AutogradViews *>(self_obj);
    Py_ssize_t n = static_cast<Py_ssize_t>(PyVectorcall_NARGS(nargsf));
    if (n != PyTuple_GET_SIZE(self->kinds) || (kwnames != nullptr && PyTuple_GET_SIZE(kwnames) != 0))
        Py_RETURN_FALSE;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!THPVariable_Check(args[i]))
            Py_RETURN_FALSE;
        PyObject *expected = PyTuple_GET_ITEM(self->kinds, i);
        if (plainly_no_view(args[i])) {
            if (PyTuple_GET_SIZE(expected) != 0)
                Py_RETURN_FALSE;
            continue;
        }
        PyObject *kind = PyObject_CallOneArg(self->autograd_view, args[i]);
        int same = kind == nullptr ? -1 : PyObject_RichCompareBool(kind, expected, Py_EQ);
        Py_XDECREF(kind);
        if (same != 1) {   // an error is a failed check, as in the Python twin's guard
            PyErr_Clear();
            Py_RETURN_FALSE;
        }
    }
    Py_RETURN_TRUE;
}

PyObject *AutogradViews_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *kinds, *autograd_view;
    if (!PyArg_ParseTuple(args, "O!O:AutogradViews", &PyTuple_Type, &kinds, &autograd_view))
        return nullptr;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kinds); i++) {
        if (!PyTuple_Check(PyTuple_GET_ITEM(kinds, i))) {
            PyErr_SetString(PyExc_TypeError, "AutogradViews: each kind is a tuple");
            return nullptr;
        }
    }
    auto *self = reinterpret_cast<AutogradViews *>(type->tp_alloc(type, 0));
    if (self == nullptr)
        return nullptr;
    self->vectorcall = AutogradViews_vectorcall;
    self->kinds = Py_NewRef(kinds);
    self->autograd_view = Py_NewRef(autograd_view);
    return reinterpret_cast<PyObject *>(self);
}

void AutogradViews_dealloc(PyObject *self_obj) {
    auto *self = reinterpret_cast<AutogradViews *>(self_obj);
    PyTypeObject *type = Py_TYPE(self_obj);
    Py_DECREF(self->kinds);
    Py_DECREF(self->autograd_view);
    type->tp_free(self_obj);
    Py_DECREF(type);
}

PyMemberDef AutogradViews_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(AutogradViews, vectorcall), READONLY, nullptr},
    {"kinds", T_OBJECT, offsetof(AutogradViews, kinds), READONLY, nullptr},
    {nullptr},
};

PyType_Slot AutogradViews_slots[] = {
    {Py_tp_doc, const_cast<char *>("AutogradViews(kinds, autograd_view)(*tensors) -> bool: each tensor is the "
                                    "kind of autograd view its entry of `kinds` says")},
    {Py_tp_new, reinterpret_cast<void *>(AutogradViews_new)},
    {Py_tp_call, reinterpret_cast<void *>(PyVectorcall_Call)},
    {Py_tp_dealloc, reinterpret_cast<void *>(AutogradViews_dealloc)},
    {Py_tp_members, AutogradViews_members},
    {0, nullptr},
};

PyType_Spec AutogradViews_spec = {
    "guards._tensor_match.AutogradViews", sizeof(AutogradViews), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL, AutogradViews_slots,
};

}  // namespace
