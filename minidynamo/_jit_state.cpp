/*
 * Is the JIT tracing on this thread?  `torch._C._get_tracing_state()` answers that from Python,
 * but as a pybind11 call that converts the answer into a Python object (a shared pointer looked
 * up in pybind11's type registry): a fifth of a microsecond, and nn.Module's call shortcut
 * (_module_call.c) asks it twice per optimized call.  Here the same thread-local state is read
 * directly, and handed to the C shortcut as a function pointer in a capsule.  Optional: without
 * this extension the shortcut calls the Python function.
 */
#include <Python.h>
#include <torch/csrc/jit/frontend/tracer.h>

namespace {

/* 1 when the JIT tracer has a state on this thread (what `_get_tracing_state() is not None` says). */
extern "C" int jit_is_tracing(void) {
    return torch::jit::tracer::isTracing() ? 1 : 0;
}

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "minidynamo._jit_state",
                          "The JIT tracer's thread state, read without Python (capsule is_tracing: int (*)(void)).",
                          -1, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__jit_state(void) {
    PyObject *module = PyModule_Create(&module_def);
    if (module == nullptr)
        return nullptr;
    PyObject *capsule = PyCapsule_New(reinterpret_cast<void *>(&jit_is_tracing), "minidynamo._jit_state.is_tracing", nullptr);
    if (capsule == nullptr || PyModule_AddObject(module, "is_tracing", capsule) < 0) {
        Py_XDECREF(capsule);
        Py_DECREF(module);
        return nullptr;
    }
    return module;
}
