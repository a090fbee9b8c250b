#pragma once

/* Part of guards/_tensor_match.cpp: Reader, the generated input reader as one native call. */

namespace {

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
                step.op != SHORTCUT && step.op != GENERIC_ATTR && step.op != CALL_READ) {
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

}  // namespace
