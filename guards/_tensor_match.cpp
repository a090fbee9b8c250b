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
 * instead: ~6 ns a tensor instead of ~200 (a plain tensor that matched before is a few word
 * compares, impl_words.h).  FastGuard runs a guard's common path (the steps
 * the dict memo cannot vouch for, then the tensors) without a Python frame:
 *
 *     TensorMatch([(type, dtype, device, sizes, strides, requires_grad[, by_contiguity]), ...])(*tensors)
 *     FastGuard(nargs, pins, memo, n_values, n_registers, program, [(register, spec), ...], fallback)(func, *args)
 *     StorageGroups(groups)(*tensors)
 *     AutogradViews(kinds, autograd_view)(*tensors)
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
#include <ATen/ops/empty.h>
#include <ATen/PythonTorchFunctionTLS.h>
#include <c10/core/DefaultDtype.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <structmember.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <typeinfo>
#include <vector>

// One translation unit, in parts (each a few hundred lines), in the order they build on each other:
#include "csrc/names_and_specs.h"   // the torch objects compared against; Spec, one tensor's expected metadata
#include "csrc/impl_words.h"       // a plain tensor's check as a few word compares
#include "csrc/xla_impl.h"          // torch_xla's device tensor, read without its virtual getters
#include "csrc/tensor_checks.h"     // one tensor against its Spec: from the TensorImpl, or through Python
#include "csrc/tensor_match.h"      // TensorMatch: every tensor of a guard in one call
#include "csrc/state_calls.h"       // torch's global-state getters, answered without a call
#include "csrc/program.h"           // reads and checks as a program of ops over registers
#include "csrc/fast_guard.h"        // FastGuard: pins, the dict memo, the program, the tensors
#include "csrc/reader.h"            // Reader: the graph-input reader as one call
#include "csrc/hand_off.h"          // HandOff: the guard's reads handed to the reader
#include "csrc/storage_groups.h"    // StorageGroups: which tensors share one storage
#include "csrc/autograd_views.h"    // AutogradViews: what kind of view, for autograd, tensors are

namespace {

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
    builtin_get_default_dtype = PyObject_GetAttrString(torch_c, "get_default_dtype");
    builtin_any_autocast_enabled = PyObject_GetAttrString(torch_c, "_is_any_autocast_enabled");
    Py_DECREF(torch_c);
    if (base == nullptr || disabled_torch_function == nullptr || builtin_is_grad_enabled == nullptr ||
        builtin_get_default_dtype == nullptr || builtin_any_autocast_enabled == nullptr ||
        !PyType_Check(base)) {
        Py_XDECREF(base);
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ImportError, "guards._tensor_match: torch._C.TensorBase is not a type");
        return false;
    }
    tensor_base_type = reinterpret_cast<PyTypeObject *>(base);   // kept for the process's life
    const char *spellings[] = {"dtype", "device", "shape", "requires_grad", "stride", "is_contiguous",
                               "__torch_function__", "layout", "values", "is_conj", "is_neg"};
    PyObject **names[] = {&str_dtype, &str_device, &str_shape, &str_requires_grad, &str_stride,
                          &str_is_contiguous, &str_torch_function, &str_layout, &str_values, &str_is_conj,
                          &str_is_neg};
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
    tensor_is_conj = _PyType_Lookup(tensor_base_type, str_is_conj);
    tensor_is_neg = _PyType_Lookup(tensor_base_type, str_is_neg);
    if (tensor_stride == nullptr || tensor_is_contiguous == nullptr || tensor_is_conj == nullptr ||
        tensor_is_neg == nullptr) {
        Py_DECREF(torch_module);
        PyErr_SetString(PyExc_ImportError,
                        "guards._tensor_match: torch._C.TensorBase lacks stride / is_contiguous / is_conj / is_neg");
        return false;
    }
    Py_INCREF(tensor_stride);          // kept for the process's life
    Py_INCREF(tensor_is_contiguous);
    Py_INCREF(tensor_is_conj);
    Py_INCREF(tensor_is_neg);
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
    find_impl_words();
    return find_plain_class_objects();
}

PyObject *reads_xla_strides(PyObject *, PyObject *) {
    return PyBool_FromLong(xla_layout.vtable != nullptr);
}

PyObject *reads_xla_sizes(PyObject *, PyObject *) {
    return PyBool_FromLong(xla_layout.fields);
}

PyMethodDef module_methods[] = {
    {"reads_xla_strides", reads_xla_strides, METH_NOARGS,
     "reads_xla_strides() -> bool: a torch_xla device tensor's strides are read after its sizes "
     "(wrapped_strides in csrc/tensor_checks.h)"},
    {"reads_xla_sizes", reads_xla_sizes, METH_NOARGS,
     "reads_xla_sizes() -> bool: a torch_xla device tensor's sizes are read from its fields while its "
     "lazy tensor's generation is the one they were copied at (csrc/xla_impl.h)"},
    {nullptr},
};

PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "guards._tensor_match",
    "Tensor guards read from at::Tensor in C++ (optional: guards falls back to C and Python).", -1,
    module_methods,
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
    PyObject *storage_groups = PyType_FromSpec(&StorageGroups_spec);
    PyObject *autograd_views = PyType_FromSpec(&AutogradViews_spec);
    if (tensor_match == nullptr || fast_guard == nullptr || reader == nullptr || hand_off == nullptr ||
        storage_groups == nullptr || PyModule_AddObjectRef(module, "StorageGroups", storage_groups) < 0 ||
        autograd_views == nullptr || PyModule_AddObjectRef(module, "AutogradViews", autograd_views) < 0 ||
        PyModule_AddObjectRef(module, "TensorMatch", tensor_match) < 0 ||
        PyModule_AddObjectRef(module, "FastGuard", fast_guard) < 0 ||
        PyModule_AddObjectRef(module, "Reader", reader) < 0 ||
        PyModule_AddObjectRef(module, "HandOff", hand_off) < 0) {
        Py_XDECREF(tensor_match);
        Py_XDECREF(fast_guard);
        Py_XDECREF(reader);
        Py_XDECREF(hand_off);
        Py_XDECREF(storage_groups);
        Py_XDECREF(autograd_views);
        Py_DECREF(module);
        return nullptr;
    }
    fast_guard_type = reinterpret_cast<PyTypeObject *>(fast_guard);   // the module keeps it
    Py_DECREF(tensor_match);
    Py_DECREF(fast_guard);
    Py_DECREF(reader);
    Py_DECREF(hand_off);
    Py_DECREF(storage_groups);
    Py_DECREF(autograd_views);
    return module;
}
