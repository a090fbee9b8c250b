#pragma once

/* Part of guards/_tensor_match.cpp: a guard's (or reader's) reads and checks as data, a
 * program of ops over registers, and its interpreter.  The program is planned in Python
 * (guards/fast_path.py) from the generated guard's steps; ops:
 *     (ATTR, dst, src, name)   dst = src.name            (ITEM, dst, src, key)  dst = src[key]
 *     (GENERIC_ATTR, dst, src, name)  dst = object.__getattribute__(src, name)
 *     (SAME, a, b): a is b    (NOT_SAME, a, b): a is not b    (DISTINCT, (src, ...)): no two the same
 *     (KEYS, src, keys): tuple(src) == keys (src a dict: its keys in order)
 *     (LOOKUP_IS, src, name, expected, flags): class_lookup(src or type(src), name) is expected
 *     (GETATTR_IS, src, name, expected, flags): getattr(src or type(src), name, MISSING) is expected
 *         (flags: EXPECT_MISSING, the lookup finds nothing; ON_TYPE, it starts at type(src))
 *     (LEN_IS, src, n): len(src) == n       (CALL_READ, dst, fn, (src, ...)): dst = fn(src, ...)
 *     (SKIP_IF_IS, src, obj, n): the next n ops are skipped when src is obj (a pinned constant's
 *         checks: what they read stays theirs, no later op reads those registers)
 *     (BUILTIN, dst, g, b, name)  dst = g[name] if name in g else b[name]
 *     (CONST, dst, obj)        (IS, src, obj)   (TYPE_IS, src, type)   (EQ, src, obj): src == obj
 *     (IS_WEAK, src, ref): src is ref() and ref() is not None (an identity guard's weak pin)
 *     (CALL_IS, fn, obj): fn() is obj   (CALL_EQ, fn, obj): fn() == obj   (CALL_TRUE, fn): fn()
 *     (CALL_WITH, fn, (src, ...)): fn(src, ...) is true
 *     (NOT_IN, key, src): key not in src     (LACKS, src, name): name not in src.__dict__
 *     (SHORTCUT, dst, holder, base, name, (shadow, ...)):
 *         dst = holder[name] if name in holder and name not in shadow and ... else base.name
 * each exactly the Python the generated guard runs for the same step; an Exception while running
 * means False, as in the generated guard's try/except. */

namespace {

enum Op { ATTR, ITEM, BUILTIN, CONST, IS, TYPE_IS, EQ, CALL_IS, CALL_EQ, CALL_TRUE, NOT_IN, SHORTCUT, LACKS, IS_WEAK,
          CALL_WITH, GENERIC_ATTR, SAME, NOT_SAME, DISTINCT, KEYS, LOOKUP_IS, GETATTR_IS, SKIP_IF_IS, LEN_IS, CALL_READ, N_OPS };

/* LOOKUP_IS / GETATTR_IS flags: the name is expected to be missing; the lookup is on type(src). */
constexpr int EXPECT_MISSING = 1, ON_TYPE = 2;

/* `value is <the object a weak reference holds>`, false once that object is gone (a dead
 * reference holds None, which a live object compared here never is: guards/guard.py `pin`). */
inline bool is_referent(PyObject *value, PyObject *ref) {
    PyObject *referent = PyWeakref_GET_OBJECT(ref);
    return referent != Py_None && value == referent;
}

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
    std::vector<Py_ssize_t> args;          // CALL_WITH, DISTINCT: the registers, in order
    int flags = 0;                         // LOOKUP_IS, GETATTR_IS; SKIP_IF_IS: the ops skipped
    Py_ssize_t length = 0;                 // LEN_IS
    StateCall state_call = NOT_A_STATE_CALL;   // CALL_IS of a global-state getter (state_calls.h)
    mutable StateMemo state_memo;
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


/* 1: the call gave exactly `expected` (identity), 0: not, -1: error. */
int call_is(const Step &step) {
    PyObject *fn = step.obj, *expected = step.obj2;
    if (step.state_call != NOT_A_STATE_CALL)
        return state_call_is(step.state_call, fn, expected, step.state_memo);
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

/* `fn(*registers)` (a new reference, or nullptr with the error set). */
PyObject *call_registers(const Step &step, PyObject **regs) {
    constexpr size_t kOnStack = 64;
    PyObject *on_stack[kOnStack];
    std::vector<PyObject *> on_heap;
    PyObject **args = on_stack;
    if (step.args.size() > kOnStack) {
        on_heap.resize(step.args.size());
        args = on_heap.data();
    }
    for (size_t i = 0; i < step.args.size(); i++)
        args[i] = regs[step.args[i]];
    return PyObject_Vectorcall(step.obj, args, step.args.size(), nullptr);
}

/* `fn(*registers)` as a condition: 1, 0, or -1 on error. */
int call_with(const Step &step, PyObject **regs) {
    return truth(call_registers(step, regs));
}

/* `tuple(obj) == keys`: an exact dict's keys compared in place while each pair is the same
 * object or two exact strings (no program code can run: the dict cannot change under us); any
 * other pair, or anything but an exact dict, as the Python text does it (a tuple, compared). */
int keys_are(PyObject *obj, PyObject *keys) {
    if (PyDict_CheckExact(obj)) {
        if (PyDict_GET_SIZE(obj) != PyTuple_GET_SIZE(keys))
            return 0;
        Py_ssize_t pos = 0, i = 0;
        PyObject *key, *value;
        bool plain = true;
        while (plain && PyDict_Next(obj, &pos, &key, &value)) {
            PyObject *expected = PyTuple_GET_ITEM(keys, i++);
            if (key == expected)
                continue;
            if (!PyUnicode_CheckExact(key) || !PyUnicode_CheckExact(expected))
                plain = false;
            else if (PyUnicode_Compare(key, expected) != 0)
                return PyErr_Occurred() ? -1 : 0;
        }
        if (plain)
            return 1;
    }
    PyObject *tuple = PySequence_Tuple(obj);
    if (tuple == nullptr)
        return -1;
    int same = PyObject_RichCompareBool(tuple, keys, Py_EQ);
    Py_DECREF(tuple);
    return same;
}

/* LOOKUP_IS: the MRO lookup (class dicts only, as `guards.class_lookup` and `_PyType_Lookup`). */
int lookup_is(const Step &step, PyObject *obj) {
    PyObject *holder = step.flags & ON_TYPE ? reinterpret_cast<PyObject *>(Py_TYPE(obj)) : obj;
    if (!PyType_Check(holder)) {
        PyErr_SetString(PyExc_TypeError, "FastGuard: a class lookup on something not a class");
        return -1;
    }
    PyObject *found = _PyType_Lookup(reinterpret_cast<PyTypeObject *>(holder), step.obj);
    if (PyErr_Occurred())
        return -1;
    return step.flags & EXPECT_MISSING ? found == nullptr : found == step.obj2;
}

/* GETATTR_IS: `getattr(holder, name, MISSING) is expected` (only AttributeError means missing). */
int getattr_is(const Step &step, PyObject *obj) {
    PyObject *holder = step.flags & ON_TYPE ? reinterpret_cast<PyObject *>(Py_TYPE(obj)) : obj;
    PyObject *found = PyObject_GetAttr(holder, step.obj);
    if (found == nullptr) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -1;
        PyErr_Clear();
        return (step.flags & EXPECT_MISSING) != 0;
    }
    Py_DECREF(found);
    return !(step.flags & EXPECT_MISSING) && found == step.obj2;
}

/* 1 when every step holds, 0 when one does not, -1 on error.  Registers it fills are owned. */
int run_program(const std::vector<Step> &steps, PyObject **regs) {
    for (size_t i = 0; i < steps.size(); i++) {
        const Step &step = steps[i];
        int ok = 1;
        PyObject *value = nullptr;
        switch (step.op) {
        case ATTR:
            value = read_attr(step, regs[step.a]);
            break;
        case ITEM:
            value = read_item(regs[step.a], step.obj);
            break;
        case GENERIC_ATTR:
            value = PyObject_GenericGetAttr(regs[step.a], step.obj);
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
        case IS_WEAK:
            ok = is_referent(regs[step.a], step.obj);
            break;
        case TYPE_IS:
            ok = reinterpret_cast<PyObject *>(Py_TYPE(regs[step.a])) == step.obj;
            break;
        case EQ:
            ok = truth(PyObject_RichCompare(regs[step.a], step.obj, Py_EQ));
            break;
        case CALL_IS:
            ok = call_is(step);
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
        case CALL_WITH:
            ok = call_with(step, regs);
            break;
        case CALL_READ:
            value = call_registers(step, regs);
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
        case SAME:
            ok = regs[step.a] == regs[step.b];
            break;
        case NOT_SAME:
            ok = regs[step.a] != regs[step.b];
            break;
        case DISTINCT:
            for (size_t k = 0; k < step.args.size() && ok; k++)
                for (size_t j = 0; j < k && ok; j++)
                    ok = regs[step.args[k]] != regs[step.args[j]];
            break;
        case KEYS:
            ok = keys_are(regs[step.a], step.obj);
            break;
        case LOOKUP_IS:
            ok = lookup_is(step, regs[step.a]);
            break;
        case GETATTR_IS:
            ok = getattr_is(step, regs[step.a]);
            break;
        case SKIP_IF_IS:
            if (regs[step.a] == step.obj)
                i += step.flags;
            break;
        case LEN_IS: {
            Py_ssize_t length = PyObject_Length(regs[step.a]);
            ok = length < 0 ? -1 : length == step.length;
            break;
        }
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

/* Each item of the tuple `registers` handed to `keep`, once all lie in [0, n_registers). */
template <typename Keep>
bool parse_registers(PyObject *registers, Py_ssize_t n_registers, Keep keep) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(registers); i++) {
        Py_ssize_t r = PyLong_AsSsize_t(PyTuple_GET_ITEM(registers, i));
        if (r < 0 || r >= n_registers) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_IndexError, "FastGuard: register %zd out of range", r);
            return false;
        }
        keep(r);
    }
    return true;
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
    Py_ssize_t dst = -1, a = -1, b = -1, length = 0;
    PyObject *obj = nullptr, *obj2 = nullptr;
    bool parsed;
    switch (op) {
    case ATTR:
    case ITEM:
    case GENERIC_ATTR:
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
    case IS_WEAK:
        parsed = PyArg_ParseTuple(item, "inO!", &op, &a, &_PyWeakref_RefType, &obj);
        break;
    case CALL_IS:
    case CALL_EQ:
        parsed = PyArg_ParseTuple(item, "iOO", &op, &obj, &obj2);
        break;
    case CALL_TRUE:
        parsed = PyArg_ParseTuple(item, "iO", &op, &obj);
        break;
    case CALL_READ: {
        PyObject *registers;
        parsed = PyArg_ParseTuple(item, "inOO!", &op, &dst, &obj, &PyTuple_Type, &registers);
        if (parsed && !parse_registers(registers, n_registers, [&](Py_ssize_t r) { step.args.push_back(r); }))
            return false;
        break;
    }
    case CALL_WITH: {
        PyObject *registers;
        parsed = PyArg_ParseTuple(item, "iOO!", &op, &obj, &PyTuple_Type, &registers);
        if (parsed && !parse_registers(registers, n_registers, [&](Py_ssize_t r) { step.args.push_back(r); }))
            return false;
        break;
    }
    case LACKS:
        parsed = PyArg_ParseTuple(item, "inU", &op, &a, &obj);
        break;
    case SAME:
    case NOT_SAME:
        parsed = PyArg_ParseTuple(item, "inn", &op, &a, &b);
        break;
    case DISTINCT: {
        PyObject *registers;
        parsed = PyArg_ParseTuple(item, "iO!", &op, &PyTuple_Type, &registers);
        if (parsed && !parse_registers(registers, n_registers, [&](Py_ssize_t r) { step.args.push_back(r); }))
            return false;
        break;
    }
    case KEYS:
        parsed = PyArg_ParseTuple(item, "inO!", &op, &a, &PyTuple_Type, &obj);
        break;
    case LOOKUP_IS:
    case GETATTR_IS:
        parsed = PyArg_ParseTuple(item, "inUOi", &op, &a, &obj, &obj2, &step.flags);
        break;
    case LEN_IS:
        parsed = PyArg_ParseTuple(item, "inn", &op, &a, &length);
        break;
    case SKIP_IF_IS:
        parsed = PyArg_ParseTuple(item, "inOi", &op, &a, &obj, &step.flags);
        if (parsed && step.flags < 0) {
            PyErr_SetString(PyExc_ValueError, "FastGuard: a jump goes forward");
            return false;
        }
        break;
    case SHORTCUT: {
        PyObject *shadows;
        parsed = PyArg_ParseTuple(item, "innnUO!", &op, &dst, &a, &b, &obj, &PyTuple_Type, &shadows);
        if (parsed && PyTuple_GET_SIZE(shadows) > MAX_SHADOWS) {
            PyErr_SetString(PyExc_ValueError, "FastGuard: too many shadows");
            return false;
        }
        if (parsed && !parse_registers(shadows, n_registers, [&](Py_ssize_t r) { step.shadows[step.n_shadows++] = r; }))
            return false;
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
    if (((op == ATTR || op == GENERIC_ATTR) && !PyUnicode_Check(obj)) || ((op == CALL_IS || op == CALL_EQ || op == CALL_TRUE || op == CALL_WITH || op == CALL_READ) &&
                                                  !PyCallable_Check(obj))) {
        PyErr_SetString(PyExc_TypeError, "FastGuard: an attribute name must be a str, a call a callable");
        return false;
    }
    step.dst = dst;
    step.a = a;
    step.b = b;
    step.length = length;
    if ((op == ATTR || op == SHORTCUT) && PyUnicode_CheckExact(obj) &&
        PyUnicode_Compare(obj, str_dunder_dict) == 0)
        obj = str_dunder_dict;   // read_attr recognises the name by identity
    if (op == ATTR && PyUnicode_CheckExact(obj))
        step.builtin_field = builtin_field_of(obj);
    step.obj = Py_XNewRef(obj);
    step.obj2 = Py_XNewRef(obj2);
    if (op == CALL_IS)
        step.state_call = state_call_of(obj, obj2);
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
        for (Py_ssize_t r : step.args)
            reads_empty = reads_empty || !filled[r];
        if (reads_empty || (step.dst >= 0 && filled[step.dst])) {
            PyErr_Format(PyExc_ValueError, "FastGuard: op %zd reads an empty register or writes a full one", i);
            return false;
        }
        if (step.dst >= 0)
            filled[step.dst] = true;
    }
    return true;
}

}  // namespace
