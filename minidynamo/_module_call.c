/*
 * Calling an nn.Module without nn.Module.__call__'s Python frames, when they would do nothing
 * but call forward.
 *
 * `module(x)` runs two Python frames before `forward` starts: `Module._wrapped_call_impl`
 * (is there a `module.compile()` version?) and `Module._call_impl` (is the JIT tracing? are there
 * hooks, the module's or global ones?).  With no hooks, no tracing and no compiled version they
 * end in `self.forward(*args, **kwargs)`.  On minidynamo's hit path those frames, twice (the
 * OptimizedModule and the module it wraps), cost more than the guard and the replay together.
 *
 * `ModuleCall(module)` is a callable that answers exactly as `module(*args, **kwargs)`: it reads
 * what `_call_impl`'s first lines read, and when each says "just call forward", calls forward
 * itself; otherwise (or whenever a read could run Python code or differ from Python's) it calls
 * the module as usual.  Every read is a plain dict lookup or a type-attribute lookup, so taking
 * the usual path after reading changes nothing.  `ModuleCall()` (no module) is the same as a
 * method: `OptimizedModule.__call__`, where the module is the object it is called on;
 * `ModuleCall(None, usual)` calls `usual(module, ...)` instead of nn.Module.__call__ when the
 * shortcut does not apply (the wrapper leaves the global hooks to the module it wraps).
 * `minidynamo/module_call.py` states the same rule in Python (the tests compare them).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030C0000
#error "minidynamo._module_call is written for CPython 3.11"
#endif

/* What the shortcut compares against, found once at import. */
static PyObject *module_type;          /* torch.nn.Module */
static PyObject *wrapped_call_impl;    /* Module.__dict__['__call__'] (_wrapped_call_impl) */
static PyObject *call_impl;            /* Module.__dict__['_call_impl'] */
static PyObject *generic_getattribute; /* object.__dict__['__getattribute__'] */
static PyObject *module_globals;       /* torch.nn.modules.module.__dict__ (the global hooks) */
static PyObject *torch_c_dict;         /* torch._C.__dict__ */
static PyObject *get_tracing_state;    /* torch._C._get_tracing_state, as imported */
static PyObject *ordered_dict_type;    /* collections.OrderedDict */
static int (*jit_is_tracing)(void);    /* minidynamo._jit_state's reader, if built (else NULL) */

static PyObject *str_call, *str_call_impl, *str_getattribute, *str_compiled_call_impl, *str_forward,
    *str_get_tracing_state;
static PyObject *own_hook_names[4], *global_hook_names[4];

static unsigned long long n_direct, n_usual;

/* An empty dict or OrderedDict: exactly what `not d` is True for, with no Python code run. */
static inline int empty_hooks(PyObject *hooks) {
    PyTypeObject *type = Py_TYPE(hooks);
    return (type == &PyDict_Type || (PyObject *)type == ordered_dict_type) && PyDict_GET_SIZE(hooks) == 0;
}

/* A class attribute that an instance attribute of that name cannot hide. */
static inline int data_descriptor(PyObject *descr) {
    return descr != NULL && Py_TYPE(descr)->tp_descr_set != NULL;
}

/* `module.name` read as the generic attribute lookup reads it, when that needs no Python code:
 * the instance dict's value, else the class attribute if it is not a descriptor (borrowed).
 * NULL when the lookup could do more (a data descriptor, a descriptor, Module.__getattr__). */
static PyObject *plain_attribute(PyTypeObject *type, PyObject *instance_dict, PyObject *name) {
    PyObject *descr = _PyType_Lookup(type, name);
    if (data_descriptor(descr))
        return NULL;
    PyObject *value = PyDict_GetItemWithError(instance_dict, name);
    if (value != NULL || PyErr_Occurred())
        return value;
    return descr != NULL && Py_TYPE(descr)->tp_descr_get == NULL ? descr : NULL;
}

/* The forward `_call_impl` would call (a new reference), or NULL (no error set) when the module
 * must be called as usual: a hook, JIT tracing, a compiled call, or anything the reads above
 * cannot answer without Python.  `as_method`: called as type(module).__call__, so only
 * nn.Module's own __call__ needs to be the one Python would run. */
static PyObject *direct_forward(PyObject *module, int as_method) {
    PyTypeObject *type = Py_TYPE(module);
    if (type->tp_getattro != ((PyTypeObject *)module_type)->tp_getattro ||
        _PyType_Lookup(type, str_getattribute) != generic_getattribute ||
        _PyType_Lookup(type, str_call_impl) != call_impl)
        return NULL;
    if (!as_method && _PyType_Lookup(type, str_call) != wrapped_call_impl)
        return NULL;
    if (as_method && _PyType_Lookup((PyTypeObject *)module_type, str_call) != wrapped_call_impl)
        return NULL;                      /* nn.Module.__call__ patched (torch.fx does it) */
    PyObject **dict_slot = _PyObject_GetDictPtr(module);
    if (dict_slot == NULL || *dict_slot == NULL || !PyDict_CheckExact(*dict_slot))
        return NULL;
    PyObject *dict = *dict_slot;
    if (PyDict_GetItemWithError(dict, str_call_impl) != NULL || PyErr_Occurred())
        return NULL;
    PyObject *compiled = plain_attribute(type, dict, str_compiled_call_impl);
    if (compiled != Py_None)
        return NULL;
    PyObject *tracing = PyDict_GetItemWithError(torch_c_dict, str_get_tracing_state);
    if (tracing != get_tracing_state)
        return NULL;
    if (jit_is_tracing != NULL) {          /* the same thread state, read without a Python call */
        if (jit_is_tracing())
            return NULL;
    } else {
        PyObject *state = PyObject_CallNoArgs(tracing);
        if (state == NULL)
            return NULL;
        Py_DECREF(state);
        if (state != Py_None)
            return NULL;
    }
    for (int i = 0; i < 4; i++) {
        PyObject *own = plain_attribute(type, dict, own_hook_names[i]);
        if (own == NULL || !empty_hooks(own))
            return NULL;
        PyObject *global = PyDict_GetItemWithError(module_globals, global_hook_names[i]);
        if (global == NULL || !empty_hooks(global))
            return NULL;
    }
    PyObject *descr = _PyType_Lookup(type, str_forward);
    if (data_descriptor(descr))
        return NULL;
    PyObject *forward = PyDict_GetItemWithError(dict, str_forward);
    if (forward != NULL)
        return Py_NewRef(forward);
    if (PyErr_Occurred() || descr == NULL || !PyFunction_Check(descr))
        return NULL;
    return PyMethod_New(descr, module);
}

/* callable(first, *args, **kwargs) from a vectorcall's arguments. */
static PyObject *call_prepended(PyObject *callable, PyObject *first, PyObject *const *args, size_t nargsf,
                                PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t total = nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
    PyObject *small[8], **stack = small;
    if (total + 1 > 8 && (stack = PyMem_Malloc((total + 1) * sizeof(PyObject *))) == NULL)
        return PyErr_NoMemory();
    stack[0] = first;
    memcpy(stack + 1, args, total * sizeof(PyObject *));
    PyObject *result = PyObject_Vectorcall(callable, stack, nargs + 1, kwnames);
    if (stack != small)
        PyMem_Free(stack);
    return result;
}

/* module(*args, **kwargs): forward directly when direct_forward allows, else the usual call
 * (`usual`, a method's own, when given). */
static PyObject *call_module(PyObject *module, int as_method, PyObject *usual, PyObject *const *args, size_t nargsf,
                             PyObject *kwnames) {
    PyObject *forward = direct_forward(module, as_method);
    if (forward != NULL) {
        n_direct++;
        PyObject *result = PyObject_Vectorcall(forward, args, nargsf, kwnames);
        Py_DECREF(forward);
        return result;
    }
    PyErr_Clear();
    n_usual++;
    if (!as_method)
        return PyObject_Vectorcall(module, args, nargsf, kwnames);
    /* usual(module, ...), or nn.Module.__call__(module, *args, **kwargs), whatever it is now */
    usual = usual != NULL ? Py_NewRef(usual) : PyObject_GetAttr(module_type, str_call);
    if (usual == NULL)
        return NULL;
    PyObject *result = call_prepended(usual, module, args, nargsf, kwnames);
    Py_DECREF(usual);
    return result;
}

/* ---- the ModuleCall type ---- */

typedef struct {
    PyObject_HEAD
    PyObject *module;          /* NULL: a method, the module comes first in each call */
    PyObject *usual;           /* a method's usual call (NULL: nn.Module.__call__, whatever it is now) */
    vectorcallfunc vectorcall;
} ModuleCall;

static PyObject *module_call_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    PyObject *module = ((ModuleCall *)self)->module;
    if (module != NULL)
        return call_module(module, 0, NULL, args, nargsf, kwnames);
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs < 1 || !PyObject_TypeCheck(args[0], (PyTypeObject *)module_type)) {
        PyErr_SetString(PyExc_TypeError, "ModuleCall() as a method needs an nn.Module first");
        return NULL;
    }
    return call_module(args[0], 1, ((ModuleCall *)self)->usual, args + 1, nargs - 1, kwnames);
}

static PyObject *module_call_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *module = NULL, *usual = NULL;
    if (!PyArg_ParseTuple(args, "|OO:ModuleCall", &module, &usual))
        return NULL;
    if (module == Py_None)
        module = NULL;
    if (module != NULL && !PyObject_TypeCheck(module, (PyTypeObject *)module_type)) {
        PyErr_Format(PyExc_TypeError, "ModuleCall() argument 1 must be an nn.Module or None, not %.100s",
                     Py_TYPE(module)->tp_name);
        return NULL;
    }
    if (usual == Py_None)
        usual = NULL;
    if (usual != NULL && (module != NULL || !PyCallable_Check(usual))) {
        PyErr_SetString(PyExc_TypeError, "ModuleCall(None, usual): a method's usual call must be a callable");
        return NULL;
    }
    ModuleCall *self = (ModuleCall *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->module = Py_XNewRef(module);
    self->usual = Py_XNewRef(usual);
    self->vectorcall = module_call_vectorcall;
    return (PyObject *)self;
}

static int module_call_traverse(ModuleCall *self, visitproc visit, void *arg) {
    Py_VISIT(self->module);
    Py_VISIT(self->usual);
    return 0;
}

static int module_call_clear(ModuleCall *self) {
    Py_CLEAR(self->module);
    Py_CLEAR(self->usual);
    return 0;
}

static void module_call_dealloc(ModuleCall *self) {
    PyObject_GC_UnTrack(self);
    module_call_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* As a method (no module of its own), `obj.__call__` is bound to obj, like a function's. */
static PyObject *module_call_descr_get(PyObject *self, PyObject *obj, PyObject *type) {
    if (((ModuleCall *)self)->module != NULL || obj == NULL || obj == Py_None)
        return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static PyObject *module_call_get_module(ModuleCall *self, void *unused) {
    return Py_NewRef(self->module ? self->module : Py_None);
}

/* What inspect.signature reports: nn.Module.__call__'s, bound to the module if there is one. */
static PyObject *module_call_get_signature(ModuleCall *self, void *unused) {
    PyObject *inspect = PyImport_ImportModule("inspect");
    if (inspect == NULL)
        return NULL;
    PyObject *target = self->module ? PyMethod_New(wrapped_call_impl, self->module) : Py_NewRef(wrapped_call_impl);
    PyObject *signature = target ? PyObject_CallMethod(inspect, "signature", "O", target) : NULL;
    Py_XDECREF(target);
    Py_DECREF(inspect);
    return signature;
}

static PyGetSetDef module_call_getset[] = {
    {"module", (getter)module_call_get_module, NULL, "the module called (None: a method)", NULL},
    {"__signature__", (getter)module_call_get_signature, NULL, "nn.Module.__call__'s signature", NULL},
    {NULL},
};

static PyTypeObject ModuleCallType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "minidynamo._module_call.ModuleCall",
    .tp_doc = "ModuleCall(module): calling it is module(*args, **kwargs), with forward called directly "
              "when nn.Module.__call__ would do nothing else. ModuleCall(): the same as a method. "
              "ModuleCall(None, usual): a method whose usual call is usual(module, *args, **kwargs).",
    .tp_basicsize = sizeof(ModuleCall),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_new = module_call_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(ModuleCall, vectorcall),
    .tp_traverse = (traverseproc)module_call_traverse,
    .tp_clear = (inquiry)module_call_clear,
    .tp_dealloc = (destructor)module_call_dealloc,
    .tp_descr_get = module_call_descr_get,
    .tp_getset = module_call_getset,
};

/* ---- the module ---- */

static PyObject *py_stats(PyObject *self, PyObject *unused) {
    return Py_BuildValue("{sKsKsO}", "direct", n_direct, "usual", n_usual, "native_tracing_check",
                         jit_is_tracing != NULL ? Py_True : Py_False);
}

/* set_jit_state(capsule): read the JIT tracer's state there (minidynamo._jit_state.is_tracing);
 * until then (or without it) torch._C._get_tracing_state() is asked. */
static PyObject *py_set_jit_state(PyObject *self, PyObject *capsule) {
    void *reader = PyCapsule_GetPointer(capsule, "minidynamo._jit_state.is_tracing");
    if (reader == NULL)
        return NULL;
    jit_is_tracing = (int (*)(void))reader;
    Py_RETURN_NONE;
}

static PyObject *py_reset_stats(PyObject *self, PyObject *unused) {
    n_direct = n_usual = 0;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"stats", py_stats, METH_NOARGS, "stats() -> {'direct': calls that went straight to forward, 'usual': the rest}"},
    {"reset_stats", py_reset_stats, METH_NOARGS, "reset_stats(): zero the counts"},
    {"set_jit_state", py_set_jit_state, METH_O, "set_jit_state(capsule): read the JIT tracer's state there"},
    {NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "minidynamo._module_call",
                                        "Calling an nn.Module without nn.Module.__call__'s Python frames.", -1,
                                        methods};

static PyObject *class_attribute(PyObject *cls, const char *name) {
    PyObject *dict = ((PyTypeObject *)cls)->tp_dict;
    PyObject *value = PyDict_GetItemString(dict, name);
    if (value == NULL)
        PyErr_Format(PyExc_ImportError, "minidynamo._module_call: %s.%s not found", ((PyTypeObject *)cls)->tp_name, name);
    return Py_XNewRef(value);
}

static int intern(PyObject **slot, const char *text) {
    *slot = PyUnicode_InternFromString(text);
    return *slot == NULL ? -1 : 0;
}

static int find_objects(void) {
    static const char *own[4] = {"_backward_hooks", "_backward_pre_hooks", "_forward_hooks", "_forward_pre_hooks"};
    static const char *global[4] = {"_global_backward_hooks", "_global_backward_pre_hooks", "_global_forward_hooks",
                                    "_global_forward_pre_hooks"};
    for (int i = 0; i < 4; i++)
        if (intern(&own_hook_names[i], own[i]) < 0 || intern(&global_hook_names[i], global[i]) < 0)
            return -1;
    if (intern(&str_call, "__call__") < 0 || intern(&str_call_impl, "_call_impl") < 0 ||
        intern(&str_getattribute, "__getattribute__") < 0 ||
        intern(&str_compiled_call_impl, "_compiled_call_impl") < 0 || intern(&str_forward, "forward") < 0 ||
        intern(&str_get_tracing_state, "_get_tracing_state") < 0)
        return -1;
    PyObject *module_py = PyImport_ImportModule("torch.nn.modules.module");
    if (module_py == NULL)
        return -1;
    module_globals = Py_NewRef(PyModule_GetDict(module_py));
    module_type = PyObject_GetAttrString(module_py, "Module");
    Py_DECREF(module_py);
    if (module_type == NULL || !PyType_Check(module_type))
        return -1;
    if ((wrapped_call_impl = class_attribute(module_type, "__call__")) == NULL ||
        (call_impl = class_attribute(module_type, "_call_impl")) == NULL ||
        (generic_getattribute = class_attribute((PyObject *)&PyBaseObject_Type, "__getattribute__")) == NULL)
        return -1;
    PyObject *torch_c = PyImport_ImportModule("torch._C");
    if (torch_c == NULL)
        return -1;
    torch_c_dict = Py_NewRef(PyModule_GetDict(torch_c));
    get_tracing_state = PyObject_GetAttr(torch_c, str_get_tracing_state);
    Py_DECREF(torch_c);
    if (get_tracing_state == NULL)
        return -1;
    PyObject *collections = PyImport_ImportModule("collections");
    if (collections == NULL)
        return -1;
    ordered_dict_type = PyObject_GetAttrString(collections, "OrderedDict");
    Py_DECREF(collections);
    return ordered_dict_type == NULL ? -1 : 0;
}

PyMODINIT_FUNC PyInit__module_call(void) {
    if (find_objects() < 0 || PyType_Ready(&ModuleCallType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "ModuleCall", (PyObject *)&ModuleCallType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
