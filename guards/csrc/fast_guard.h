#pragma once

/* Part of guards/_tensor_match.cpp.
 *
 * The common case of a guard function, as one native call: guard(func, *args) -> bool.
 *
 *     FastGuard(nargs, pins, memo, n_values, n_registers, program, tensors, fallback)
 *
 * When every (arg_index, obj, weak) of `pins` has args[arg_index] is obj (obj() for a weak pin, a
 * weak reference that fails once its object is gone) and `memo` (a DictMemo, or
 * None) says nothing it vouches for changed, the program runs over registers
 * [func, *args, *memo.values, <one per read>] and then the tensors are matched; else the answer
 * is fallback(func, *args) (the generated Python guard, which re-notes the memo), or False when
 * there is no fallback.  The program is the memo's "volatile" steps as data, planned in Python
 * (guards/fast_path.py: fast_guard; its ops are in program.h).  Instances carry a __dict__. */

namespace {

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
    PyObject *pins;                        // tuple of (arg_index, obj, weak): weak pins hold a weakref
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
        PyObject *arg = args[1 + PyLong_AsSsize_t(PyTuple_GET_ITEM(pin, 0))], *held = PyTuple_GET_ITEM(pin, 1);
        fast = PyTuple_GET_ITEM(pin, 2) == Py_True ? is_referent(arg, held) : arg == held;
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
        PyObject *obj, *weak;
        if (!PyTuple_Check(pin) || !PyArg_ParseTuple(pin, "nOO!", &index, &obj, &PyBool_Type, &weak))
            return nullptr;
        if (weak == Py_True && !PyWeakref_CheckRef(obj)) {
            PyErr_SetString(PyExc_TypeError, "FastGuard: a weak pin must be a weak reference");
            return nullptr;
        }
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

}  // namespace
