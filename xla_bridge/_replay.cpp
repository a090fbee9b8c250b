/* The replay call in C++: from the arguments to ``_run_cached_graph`` and back, no Python frame.
 *
 * A ``BridgedCall`` (backends.py) answers every call in Python: it re-checks what the compiled
 * graph was built for, maps the arguments to the graph's inputs, replays the graph by hash,
 * writes in-place updates back and shapes the output. On the common path of a model kept on
 * the device (every tensor argument already device data, no in-place update, no random seed,
 * no output aliasing an argument) that work is a fixed recipe, and this object runs it:
 *
 *     Replay(fallback)                  # fallback: the BridgedCall, called for everything else
 *     replay.arm(plan)                  # the recipe of the graph the BridgedCall would replay
 *     replay(*args)                     # the recipe, or fallback(*args) when it does not apply
 *
 * Per call, in order (any "no" hands the call to the fallback, which decides it the Python way):
 *   1. armed, no phase timer active (``xla_bridge.timing.active``: timed calls take the Python
 *      path, which splits them into phases), not a grad-mode call of a graph whose inputs need
 *      gradients (the training path), no TorchFunctionMode or TorchDispatchMode active (it
 *      would see the ops of an eager run: the Python path runs such a call eagerly), no dual
 *      level of forward-mode AD open;
 *   2. every tensor argument is a torch.Tensor on the XLA device with the dtype and sizes the
 *      graph was compiled for, read from the TensorImpl (no Python object built); every
 *      Python-value argument is of the same type and equal to the traced one;
 *   3. ``_XLAC._run_cached_graph(hash, inputs)`` (looked up on each call, so a stand-in installed
 *      on ``_XLAC`` is seen), inputs picked from the arguments and the baked tensors. The runtime
 *      refuses an input holding pending lazy computation ("input data to dynamo graph can not
 *      be a pending ir") before it executes anything: that error, or any other, sends the call to
 *      the fallback, which materializes such inputs (or recompiles an evicted hash) and replays;
 *   4. the output leaves from the results, the arguments and traced Python values, as one leaf,
 *      a tuple or a list.
 * ``counters.replays`` is counted as the Python path counts it.
 *
 * Attributes not found on the object are read from the fallback (``replay.program``...). The
 * fallback refers back to this object weakly (to re-arm it), so no cycle keeps either alive.
 *
 * ``replay.cache_entry_fn(...)`` builds an ``Entry`` (below): the cache entry's body around this
 * object, reader and output included, which may skip step 2's tensor checks that the entry's
 * guard has just made on the same objects.
 */
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/Device.h>
#include <torch/csrc/Dtype.h>
#include <ATen/PythonTorchFunctionTLS.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <c10/core/GradMode.h>

#include <structmember.h>

#include <algorithm>

#include <cstdint>
#include <vector>

namespace {

PyObject *str_run_cached_graph, *str_active, *str_replays;
PyObject *str_current_level;
PyObject *forward_ad_dict;     // torch.autograd.forward_ad.__dict__: its _current_level is -1 with no dual level open

struct TensorSpec {
    Py_ssize_t position;
    c10::ScalarType dtype;
    std::vector<int64_t> sizes;
};

enum LeafKind { RESULT = 0, ARGUMENT = 1, VALUE = 2 };

struct Leaf {
    int kind;
    Py_ssize_t index;     // RESULT: index into the results; ARGUMENT: argument position
    PyObject *value;      // VALUE: the traced Python value (owned)
};

enum OutKind { OUT_LEAF = 0, OUT_TUPLE = 1, OUT_LIST = 2 };

struct Plan {
    Py_ssize_t nargs = 0;
    bool check_grad_mode = false;
    c10::Device device = c10::Device(c10::DeviceType::CPU);
    std::vector<TensorSpec> tensors;
    std::vector<std::pair<Py_ssize_t, PyObject *>> values;   // (position, traced value: owned)
    std::vector<Py_ssize_t> pick;      // graph input k <- args[i], or baked[i - nargs]
    std::vector<Leaf> leaves;
    int out_kind = OUT_LEAF;
};

struct Replay {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *fallback;        // the BridgedCall
    PyObject *graph_hash;      // None: disarmed
    PyObject *baked;           // tuple of device tensors made while tracing
    PyObject *xlac_dict;       // torch_xla._XLAC.__dict__
    PyObject *timing_dict;     // xla_bridge.timing.__dict__
    PyObject *counters;        // xla_bridge.counters
    PyObject *dict;
    PyObject *weakreflist;
    Plan *plan;
    uint64_t generation;       // bumped by every arm/disarm (an Entry re-derives what it vouches)
};

void clear_plan(Plan *plan) {
    for (auto &value : plan->values)
        Py_CLEAR(value.second);
    for (auto &leaf : plan->leaves)
        Py_CLEAR(leaf.value);
    *plan = Plan();
}

PyObject *call_fallback(Replay *self, PyObject *const *args, size_t nargsf) {
    return PyObject_Vectorcall(self->fallback, args, PyVectorcall_NARGS(nargsf), nullptr);
}

/* Do the arguments fit the armed graph (step 2)? -1: a Python error.  ``vouched`` (or null):
 * per tensor spec, whether a guard that just passed on these very objects checked the same
 * dtype, device and sizes (see Entry), so the check would repeat its answer. */
int arguments_fit(const Plan &plan, PyObject *const *args, const std::vector<char> *vouched) {
    for (size_t k = 0; k < plan.tensors.size(); k++) {
        if (vouched != nullptr && (*vouched)[k])
            continue;
        const TensorSpec &spec = plan.tensors[k];
        PyObject *obj = args[spec.position];
        if (!THPVariable_Check(obj))
            return 0;
        const at::Tensor &tensor = THPVariable_Unpack(obj);
        if (!tensor.defined() || tensor.device() != plan.device || tensor.scalar_type() != spec.dtype)
            return 0;
        try {
            c10::IntArrayRef sizes = tensor.sizes();
            if (sizes.size() != spec.sizes.size() ||
                !std::equal(sizes.begin(), sizes.end(), spec.sizes.begin()))
                return 0;
        } catch (...) {            // symbolic sizes, or anything the TensorImpl cannot answer
            return 0;
        }
    }
    for (const auto &value : plan.values) {
        PyObject *obj = args[value.first];
        if (obj == value.second)
            continue;
        if (Py_TYPE(obj) != Py_TYPE(value.second))
            return 0;
        int equal = PyObject_RichCompareBool(obj, value.second, Py_EQ);
        if (equal <= 0)
            return equal;
    }
    return 1;
}

PyObject *count_replay(Replay *self) {
    PyObject *count = PyObject_GetAttr(self->counters, str_replays);
    if (count == nullptr)
        return nullptr;
    PyObject *one = PyLong_FromLong(1);
    PyObject *next = one == nullptr ? nullptr : PyNumber_Add(count, one);
    Py_DECREF(count);
    Py_XDECREF(one);
    if (next == nullptr)
        return nullptr;
    int failed = PyObject_SetAttr(self->counters, str_replays, next);
    Py_DECREF(next);
    return failed ? nullptr : Py_None;
}

PyObject *build_output(const Plan &plan, PyObject *const *args, PyObject *results) {
    Py_ssize_t count = static_cast<Py_ssize_t>(plan.leaves.size());
    Py_ssize_t result_count = PyList_GET_SIZE(results);
    auto leaf_of = [&](const Leaf &leaf) -> PyObject * {
        PyObject *obj = leaf.kind == RESULT ? (leaf.index < result_count ? PyList_GET_ITEM(results, leaf.index) : nullptr)
                        : leaf.kind == ARGUMENT ? args[leaf.index] : leaf.value;
        if (obj == nullptr)
            PyErr_SetString(PyExc_RuntimeError, "xla_bridge._replay: fewer results than planned");
        Py_XINCREF(obj);
        return obj;
    };
    if (plan.out_kind == OUT_LEAF)
        return leaf_of(plan.leaves[0]);
    PyObject *out = plan.out_kind == OUT_TUPLE ? PyTuple_New(count) : PyList_New(count);
    if (out == nullptr)
        return nullptr;
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *leaf = leaf_of(plan.leaves[k]);
        if (leaf == nullptr) {
            Py_DECREF(out);
            return nullptr;
        }
        if (plan.out_kind == OUT_TUPLE)
            PyTuple_SET_ITEM(out, k, leaf);
        else
            PyList_SET_ITEM(out, k, leaf);
    }
    return out;
}

/* A dual level of forward-mode AD is open (its tangents would be lost on the device): asked of
 * the Python module that opens them, as the fallback asks it. */
bool forward_ad_active() {
    PyObject *level = PyDict_GetItemWithError(forward_ad_dict, str_current_level);
    if (level == nullptr) {
        PyErr_Clear();
        return true;
    }
    return !PyLong_CheckExact(level) || PyLong_AsLong(level) != -1;
}

/* One call with positional ``args`` (steps 1-4); ``vouched``: see arguments_fit. */
PyObject *replay_call(Replay *self, PyObject *const *args, Py_ssize_t nargs, const std::vector<char> *vouched) {
    const Plan &plan = *self->plan;
    size_t nargsf = static_cast<size_t>(nargs);
    if (self->graph_hash == Py_None || nargs != plan.nargs || (plan.check_grad_mode && c10::GradMode::is_enabled())
        || at::impl::torch_function_mode_enabled() || c10::impl::TorchDispatchModeTLS::any_modes_set()
        || forward_ad_active())
        return call_fallback(self, args, nargsf);     // (a mode the replayed program would bypass)
    PyObject *timer = PyDict_GetItemWithError(self->timing_dict, str_active);
    if (timer != nullptr && timer != Py_None)
        return call_fallback(self, args, nargsf);
    int fit = arguments_fit(plan, args, vouched);
    if (fit <= 0) {
        if (fit < 0)
            PyErr_Clear();
        return call_fallback(self, args, nargsf);
    }
    PyObject *run = PyDict_GetItemWithError(self->xlac_dict, str_run_cached_graph);
    Py_ssize_t count = static_cast<Py_ssize_t>(plan.pick.size());
    PyObject *inputs = run == nullptr ? nullptr : PyTuple_New(count);
    if (inputs == nullptr) {
        PyErr_Clear();
        return call_fallback(self, args, nargsf);
    }
    for (Py_ssize_t k = 0; k < count; k++) {
        Py_ssize_t i = plan.pick[k];
        PyObject *obj = i < nargs ? args[i] : PyTuple_GET_ITEM(self->baked, i - nargs);
        Py_INCREF(obj);
        PyTuple_SET_ITEM(inputs, k, obj);
    }
    PyObject *call_args[2] = {self->graph_hash, inputs};
    PyObject *results = PyObject_Vectorcall(run, call_args, 2, nullptr);
    Py_DECREF(inputs);
    if (results == nullptr || !PyList_Check(results)) {
        // A pending input, an evicted hash, a stand-in's answer: the Python path decides, and
        // raises if the call really fails (an interrupt is not swallowed).
        if (results == nullptr && !PyErr_ExceptionMatches(PyExc_Exception))
            return nullptr;
        PyErr_Clear();
        Py_XDECREF(results);
        return call_fallback(self, args, nargsf);
    }
    PyObject *out = count_replay(self) == nullptr ? nullptr : build_output(plan, args, results);
    Py_DECREF(results);
    return out;
}

PyObject *Replay_vectorcall(PyObject *self_obj, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    auto *self = reinterpret_cast<Replay *>(self_obj);
    if (kwnames != nullptr)
        return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
    return replay_call(self, args, PyVectorcall_NARGS(nargsf), nullptr);
}

// ---------------------------------------------------------------------------------- arming

bool read_sizes(PyObject *seq, std::vector<int64_t> &sizes) {
    PyObject *fast = PySequence_Fast(seq, "sizes must be a sequence");
    if (fast == nullptr)
        return false;
    for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(fast); k++) {
        long long size = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, k));
        if (size == -1 && PyErr_Occurred()) {
            Py_DECREF(fast);
            return false;
        }
        sizes.push_back(size);
    }
    Py_DECREF(fast);
    return true;
}

/* arm(graph_hash, nargs, check_grad_mode, device, tensors, values, pick, baked, leaves, out_kind)
 *   tensors: [(position, dtype, sizes)]; values: [(position, value)]; pick: [index];
 *   baked: tuple of tensors; leaves: [(kind, index or value)]; out_kind: 0 leaf, 1 tuple, 2 list */
PyObject *Replay_arm(PyObject *self_obj, PyObject *a) {
    auto *self = reinterpret_cast<Replay *>(self_obj);
    PyObject *graph_hash, *device, *tensors, *values, *pick, *baked, *leaves;
    Py_ssize_t nargs;
    int check_grad_mode, out_kind;
    if (!PyArg_ParseTuple(a, "OnpOOOOO!Oi", &graph_hash, &nargs, &check_grad_mode, &device, &tensors,
                          &values, &pick, &PyTuple_Type, &baked, &leaves, &out_kind))
        return nullptr;
    Plan plan;
    plan.nargs = nargs;
    plan.check_grad_mode = check_grad_mode;
    plan.out_kind = out_kind;
    try {
        if (!THPDevice_Check(device)) {
            PyErr_SetString(PyExc_TypeError, "device must be a torch.device");
            return nullptr;
        }
        plan.device = reinterpret_cast<THPDevice *>(device)->device;
        PyObject *item;
        PyObject *it = PyObject_GetIter(tensors);
        while (it != nullptr && (item = PyIter_Next(it)) != nullptr) {
            PyObject *dtype, *sizes;
            TensorSpec spec;
            bool ok = PyArg_ParseTuple(item, "nOO", &spec.position, &dtype, &sizes) && THPDtype_Check(dtype) &&
                      read_sizes(sizes, spec.sizes);
            Py_DECREF(item);
            if (!ok) {
                Py_DECREF(it);
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "tensors: (position, torch.dtype, sizes)");
                clear_plan(&plan);
                return nullptr;
            }
            spec.dtype = reinterpret_cast<THPDtype *>(dtype)->scalar_type;
            plan.tensors.push_back(std::move(spec));
        }
        Py_XDECREF(it);
        it = PyErr_Occurred() ? nullptr : PyObject_GetIter(values);
        while (it != nullptr && (item = PyIter_Next(it)) != nullptr) {
            Py_ssize_t position;
            PyObject *value;
            bool ok = PyArg_ParseTuple(item, "nO", &position, &value);
            if (ok)
                plan.values.emplace_back(position, Py_NewRef(value));
            Py_DECREF(item);
            if (!ok)
                break;
        }
        Py_XDECREF(it);
        it = PyErr_Occurred() ? nullptr : PyObject_GetIter(pick);
        while (it != nullptr && (item = PyIter_Next(it)) != nullptr) {
            plan.pick.push_back(PyLong_AsSsize_t(item));
            Py_DECREF(item);
        }
        Py_XDECREF(it);
        it = PyErr_Occurred() ? nullptr : PyObject_GetIter(leaves);
        while (it != nullptr && (item = PyIter_Next(it)) != nullptr) {
            Leaf leaf{0, 0, nullptr};
            PyObject *payload;
            bool ok = PyArg_ParseTuple(item, "iO", &leaf.kind, &payload);
            if (ok && leaf.kind == VALUE)
                leaf.value = Py_NewRef(payload);
            else if (ok)
                leaf.index = PyLong_AsSsize_t(payload);
            Py_DECREF(item);
            plan.leaves.push_back(leaf);
            if (!ok || PyErr_Occurred())
                break;
        }
        Py_XDECREF(it);
    } catch (const std::exception &error) {
        PyErr_SetString(PyExc_RuntimeError, error.what());
    }
    bool bad = PyErr_Occurred() || plan.leaves.empty() || (out_kind == OUT_LEAF && plan.leaves.size() != 1);
    for (Py_ssize_t i : plan.pick)
        bad = bad || i < 0 || i >= nargs + PyTuple_GET_SIZE(baked);
    for (const auto &spec : plan.tensors)
        bad = bad || spec.position < 0 || spec.position >= nargs;
    for (const auto &value : plan.values)
        bad = bad || value.first < 0 || value.first >= nargs;
    for (const auto &leaf : plan.leaves)
        bad = bad || (leaf.kind == ARGUMENT && (leaf.index < 0 || leaf.index >= nargs)) ||
              (leaf.kind == RESULT && leaf.index < 0) || leaf.kind < RESULT || leaf.kind > VALUE;
    if (bad) {
        clear_plan(&plan);
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "xla_bridge._replay: inconsistent plan");
        return nullptr;
    }
    clear_plan(self->plan);
    *self->plan = std::move(plan);
    self->generation++;
    Py_INCREF(graph_hash);
    Py_SETREF(self->graph_hash, graph_hash);
    Py_INCREF(baked);
    Py_SETREF(self->baked, baked);
    Py_RETURN_NONE;
}

PyObject *Replay_disarm(PyObject *self_obj, PyObject *) {
    auto *self = reinterpret_cast<Replay *>(self_obj);
    clear_plan(self->plan);
    self->generation++;
    Py_INCREF(Py_None);
    Py_SETREF(self->graph_hash, Py_None);
    Py_RETURN_NONE;
}

PyObject *Replay_armed(PyObject *self_obj, void *) {
    return PyBool_FromLong(reinterpret_cast<Replay *>(self_obj)->graph_hash != Py_None);
}

/* Replay(fallback, xlac_module, timing_module, counters) */
PyObject *Replay_new(PyTypeObject *type, PyObject *a, PyObject *kw) {
    PyObject *fallback, *xlac, *timing, *counters;
    if (!PyArg_ParseTuple(a, "OO!O!O", &fallback, &PyModule_Type, &xlac, &PyModule_Type, &timing, &counters))
        return nullptr;
    auto *self = reinterpret_cast<Replay *>(type->tp_alloc(type, 0));
    if (self == nullptr)
        return nullptr;
    self->vectorcall = Replay_vectorcall;
    self->fallback = Py_NewRef(fallback);
    self->graph_hash = Py_NewRef(Py_None);
    self->baked = PyTuple_New(0);
    self->xlac_dict = Py_NewRef(PyModule_GetDict(xlac));
    self->timing_dict = Py_NewRef(PyModule_GetDict(timing));
    self->counters = Py_NewRef(counters);
    self->plan = new Plan();
    return reinterpret_cast<PyObject *>(self);
}

PyObject *Replay_getattro(PyObject *self_obj, PyObject *name) {
    PyObject *found = PyObject_GenericGetAttr(self_obj, name);
    if (found != nullptr || !PyErr_ExceptionMatches(PyExc_AttributeError))
        return found;
    PyErr_Clear();
    return PyObject_GetAttr(reinterpret_cast<Replay *>(self_obj)->fallback, name);
}

int Replay_traverse(PyObject *self_obj, visitproc visit, void *arg) {
    auto *self = reinterpret_cast<Replay *>(self_obj);
    Py_VISIT(Py_TYPE(self_obj));
    Py_VISIT(self->fallback);
    Py_VISIT(self->baked);
    Py_VISIT(self->counters);
    Py_VISIT(self->dict);
    if (self->plan != nullptr) {
        for (auto &value : self->plan->values)
            Py_VISIT(value.second);
        for (auto &leaf : self->plan->leaves)
            Py_VISIT(leaf.value);
    }
    return 0;
}

int Replay_clear(PyObject *self_obj) {
    auto *self = reinterpret_cast<Replay *>(self_obj);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->graph_hash);
    Py_CLEAR(self->baked);
    Py_CLEAR(self->xlac_dict);
    Py_CLEAR(self->timing_dict);
    Py_CLEAR(self->counters);
    Py_CLEAR(self->dict);
    if (self->plan != nullptr)
        clear_plan(self->plan);
    return 0;
}

void Replay_dealloc(PyObject *self_obj) {
    auto *self = reinterpret_cast<Replay *>(self_obj);
    PyTypeObject *type = Py_TYPE(self_obj);
    PyObject_GC_UnTrack(self_obj);
    if (self->weakreflist != nullptr)
        PyObject_ClearWeakRefs(self_obj);
    Replay_clear(self_obj);
    delete self->plan;
    self->plan = nullptr;
    type->tp_free(self_obj);
    Py_DECREF(type);
}


// ---------------------------------------------------------------------------------- Entry

/* The cache entry's body around a Replay, in C: what convert_frame's generated
 *
 *     def compiled_fn(func, *slots):
 *         try:
 *             outputs = replay(*read_inputs(func, *slots))
 *         except BaseException as error:
 *             if not graph_raised(error):
 *                 raise
 *         else:
 *             return build_output(outputs)
 *         return rerun(func, *slots)
 *
 * does, with no Python frame and no ``*`` repacking of the inputs (hundreds: a model's weights).
 *
 * Vouching.  When ``read_inputs`` is a guard's HandOff, its ``handed`` flag says the list it
 * just gave is the objects the entry's guard read and checked a moment ago for this very call
 * (nothing ran in between).  ``vouch[i]`` is (dtype, device, sizes) the guard's tensor check
 * requires of input i, or None.  A tensor spec of the armed plan whose position the guard checks
 * for the same dtype, device and sizes need not be checked again on such a call: the answer is
 * the guard's.  Which specs that covers is derived once per plan (``generation``), never per
 * call; every other check (grad mode, Python values, unvouched tensors) still runs. */
struct Entry {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *dict;
    Replay *replay;
    PyObject *reader, *build_output, *graph_raised, *rerun;   // build_output: None = the outputs
    PyObject *vouch;                 // list of (dtype, device, sizes) or None per input; or None
    PyObject *weakreflist;
    uint64_t generation_seen;        // of the plan `skip` was derived for
    std::vector<char> *skip;         // per tensor spec of that plan: vouched by the guard
};

PyObject *str_handed;

/* Does the guard's (dtype, device, sizes) promise what `spec` asks, on `device`? */
bool promises(PyObject *vouched, const TensorSpec &spec, const c10::Device &device) {
    if (vouched == nullptr || !PyTuple_Check(vouched) || PyTuple_GET_SIZE(vouched) != 3)
        return false;
    PyObject *dtype = PyTuple_GET_ITEM(vouched, 0), *dev = PyTuple_GET_ITEM(vouched, 1),
             *sizes = PyTuple_GET_ITEM(vouched, 2);
    if (!THPDtype_Check(dtype) || reinterpret_cast<THPDtype *>(dtype)->scalar_type != spec.dtype)
        return false;
    if (!THPDevice_Check(dev) || reinterpret_cast<THPDevice *>(dev)->device != device)
        return false;
    std::vector<int64_t> promised;
    if (!read_sizes(sizes, promised)) {
        PyErr_Clear();
        return false;
    }
    return promised == spec.sizes;
}

/* `skip` for the Replay's current plan (derived again only when the plan changed). */
const std::vector<char> *vouched_specs(Entry *self) {
    Replay *replay = self->replay;
    if (self->generation_seen != replay->generation) {
        const Plan &plan = *replay->plan;
        self->skip->assign(plan.tensors.size(), 0);
        Py_ssize_t known = PyList_Check(self->vouch) ? PyList_GET_SIZE(self->vouch) : 0;
        for (size_t k = 0; k < plan.tensors.size(); k++) {
            Py_ssize_t position = plan.tensors[k].position;
            PyObject *vouched = position < known ? PyList_GET_ITEM(self->vouch, position) : nullptr;
            (*self->skip)[k] = promises(vouched, plan.tensors[k], plan.device);
        }
        self->generation_seen = replay->generation;
    }
    return self->skip;
}

/* The graph (or the reader) raised: graph_raised(error) decides between re-raising it and
 * re-running the frame, as the generated Python's `except` does. */
PyObject *entry_raised(Entry *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    if (traceback != nullptr && value != nullptr)
        PyException_SetTraceback(value, traceback);
    PyObject *error = value != nullptr ? value : Py_None;
    PyObject *answer = PyObject_Vectorcall(self->graph_raised, &error, 1, nullptr);
    int rerun = answer == nullptr ? -1 : PyObject_IsTrue(answer);
    Py_XDECREF(answer);
    if (rerun < 0) {               // the handler itself failed: its error, in the context of ours
        PyObject *t2, *v2, *tb2;
        PyErr_Fetch(&t2, &v2, &tb2);
        PyErr_NormalizeException(&t2, &v2, &tb2);
        if (v2 != nullptr && value != nullptr)
            PyException_SetContext(v2, Py_NewRef(value));
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(traceback);
        PyErr_Restore(t2, v2, tb2);
        return nullptr;
    }
    if (!rerun) {
        PyErr_Restore(type, value, traceback);
        return nullptr;
    }
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
    return PyObject_Vectorcall(self->rerun, args, nargsf, kwnames);
}

PyObject *Entry_vectorcall(PyObject *self_obj, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    auto *self = reinterpret_cast<Entry *>(self_obj);
    PyObject *values = PyObject_Vectorcall(self->reader, args, nargsf, kwnames);
    if (values == nullptr)
        return entry_raised(self, args, nargsf, kwnames);
    const std::vector<char> *vouched = nullptr;
    if (self->vouch != Py_None) {
        PyObject *handed = PyObject_GetAttr(self->reader, str_handed);
        if (handed == Py_True)
            vouched = vouched_specs(self);
        if (handed == nullptr)
            PyErr_Clear();
        Py_XDECREF(handed);
    }
    PyObject *inputs = PySequence_Fast(values, "xla_bridge._replay.Entry: the reader must return a sequence");
    Py_DECREF(values);
    if (inputs == nullptr)
        return entry_raised(self, args, nargsf, kwnames);
    PyObject *outputs = replay_call(self->replay, PySequence_Fast_ITEMS(inputs), PySequence_Fast_GET_SIZE(inputs),
                                    vouched);
    Py_DECREF(inputs);
    if (outputs == nullptr)
        return entry_raised(self, args, nargsf, kwnames);
    if (self->build_output == Py_None)
        return outputs;
    PyObject *result = PyObject_Vectorcall(self->build_output, &outputs, 1, nullptr);
    Py_DECREF(outputs);
    return result;
}

int Entry_traverse(PyObject *self_obj, visitproc visit, void *arg) {
    auto *self = reinterpret_cast<Entry *>(self_obj);
    Py_VISIT(Py_TYPE(self_obj));
    Py_VISIT(self->dict);
    Py_VISIT(reinterpret_cast<PyObject *>(self->replay));
    Py_VISIT(self->reader);
    Py_VISIT(self->build_output);
    Py_VISIT(self->graph_raised);
    Py_VISIT(self->rerun);
    Py_VISIT(self->vouch);
    return 0;
}

int Entry_clear(PyObject *self_obj) {
    auto *self = reinterpret_cast<Entry *>(self_obj);
    Py_CLEAR(self->dict);
    Py_CLEAR(self->replay);
    Py_CLEAR(self->reader);
    Py_CLEAR(self->build_output);
    Py_CLEAR(self->graph_raised);
    Py_CLEAR(self->rerun);
    Py_CLEAR(self->vouch);
    return 0;
}

void Entry_dealloc(PyObject *self_obj) {
    auto *self = reinterpret_cast<Entry *>(self_obj);
    PyTypeObject *type = Py_TYPE(self_obj);
    PyObject_GC_UnTrack(self_obj);
    if (self->weakreflist != nullptr)
        PyObject_ClearWeakRefs(self_obj);
    Entry_clear(self_obj);
    delete self->skip;
    self->skip = nullptr;
    type->tp_free(self_obj);
    Py_DECREF(type);
}

PyMemberDef Entry_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Entry, vectorcall), READONLY, nullptr},
    {"__dictoffset__", T_PYSSIZET, offsetof(Entry, dict), READONLY, nullptr},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(Entry, weakreflist), READONLY, nullptr},
    {"vouch", T_OBJECT, offsetof(Entry, vouch), READONLY, "per input: (dtype, device, sizes) its guard checks"},
    {nullptr},
};

PyObject *Entry_vouched(PyObject *self_obj, void *) {
    auto *self = reinterpret_cast<Entry *>(self_obj);
    if (self->vouch == Py_None)
        return PyTuple_New(0);
    const std::vector<char> &skip = *vouched_specs(self);
    const Plan &plan = *self->replay->plan;
    PyObject *out = PyList_New(0);
    for (size_t k = 0; out != nullptr && k < skip.size(); k++) {
        if (!skip[k])
            continue;
        PyObject *position = PyLong_FromSsize_t(plan.tensors[k].position);
        if (position == nullptr || PyList_Append(out, position) < 0)
            Py_CLEAR(out);
        Py_XDECREF(position);
    }
    if (out == nullptr)
        return nullptr;
    Py_SETREF(out, PyList_AsTuple(out));
    return out;
}

PyGetSetDef Entry_getset[] = {
    {"vouched_positions", Entry_vouched, nullptr,
     "input positions whose tensor checks a handed-off call leaves to the guard (armed plan)", nullptr},
    {nullptr},
};

PyType_Slot Entry_slots[] = {
    {Py_tp_doc, const_cast<char *>("Entry: a cache entry's body around a Replay (Replay.cache_entry_fn)")},
    {Py_tp_call, reinterpret_cast<void *>(PyVectorcall_Call)},
    {Py_tp_traverse, reinterpret_cast<void *>(Entry_traverse)},
    {Py_tp_clear, reinterpret_cast<void *>(Entry_clear)},
    {Py_tp_dealloc, reinterpret_cast<void *>(Entry_dealloc)},
    {Py_tp_members, Entry_members},
    {Py_tp_getset, Entry_getset},
    {Py_tp_getattro, reinterpret_cast<void *>(PyObject_GenericGetAttr)},
    {Py_tp_setattro, reinterpret_cast<void *>(PyObject_GenericSetAttr)},
    {0, nullptr},
};

PyType_Spec Entry_spec = {
    "xla_bridge._replay.Entry", sizeof(Entry), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL, Entry_slots,
};

PyTypeObject *entry_type;

/* replay.cache_entry_fn(read_inputs, build_output, graph_raised, rerun, vouch) -> Entry */
PyObject *Replay_cache_entry_fn(PyObject *self_obj, PyObject *a) {
    PyObject *reader, *build_output, *graph_raised, *rerun, *vouch;
    if (!PyArg_ParseTuple(a, "OOOOO", &reader, &build_output, &graph_raised, &rerun, &vouch))
        return nullptr;
    if (vouch != Py_None && !PyList_Check(vouch)) {
        PyErr_SetString(PyExc_TypeError, "vouch must be a list or None");
        return nullptr;
    }
    auto *self = reinterpret_cast<Entry *>(entry_type->tp_alloc(entry_type, 0));
    if (self == nullptr)
        return nullptr;
    self->vectorcall = Entry_vectorcall;
    self->replay = reinterpret_cast<Replay *>(Py_NewRef(self_obj));
    self->reader = Py_NewRef(reader);
    self->build_output = Py_NewRef(build_output);
    self->graph_raised = Py_NewRef(graph_raised);
    self->rerun = Py_NewRef(rerun);
    self->vouch = Py_NewRef(vouch);
    self->skip = new std::vector<char>();
    self->generation_seen = self->replay->generation - 1;   // derive on first use
    return reinterpret_cast<PyObject *>(self);
}

PyMethodDef Replay_methods[] = {
    {"arm", Replay_arm, METH_VARARGS, "arm(graph_hash, nargs, check_grad_mode, device, tensors, values, pick, "
                                      "baked, leaves, out_kind): the recipe of one compiled graph"},
    {"disarm", Replay_disarm, METH_NOARGS, "send every call to the fallback"},
    {"cache_entry_fn", Replay_cache_entry_fn, METH_VARARGS,
     "cache_entry_fn(read_inputs, build_output, graph_raised, rerun, vouch): the cache entry's body in C "
     "(build_output None: the outputs themselves; vouch: see Entry)"},
    {nullptr},
};

PyGetSetDef Replay_getset[] = {
    {"armed", Replay_armed, nullptr, "whether calls can take the C++ path", nullptr},
    {nullptr},
};

PyMemberDef Replay_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Replay, vectorcall), READONLY, nullptr},
    {"__dictoffset__", T_PYSSIZET, offsetof(Replay, dict), READONLY, nullptr},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(Replay, weakreflist), READONLY, nullptr},
    {"fallback", T_OBJECT, offsetof(Replay, fallback), READONLY, "the Python path (a BridgedCall)"},
    {nullptr},
};

PyType_Slot Replay_slots[] = {
    {Py_tp_doc, const_cast<char *>("Replay(fallback, _XLAC, timing, counters)(*args): the common replay "
                                    "call in C++, fallback(*args) otherwise")},
    {Py_tp_new, reinterpret_cast<void *>(Replay_new)},
    {Py_tp_call, reinterpret_cast<void *>(PyVectorcall_Call)},
    {Py_tp_traverse, reinterpret_cast<void *>(Replay_traverse)},
    {Py_tp_clear, reinterpret_cast<void *>(Replay_clear)},
    {Py_tp_dealloc, reinterpret_cast<void *>(Replay_dealloc)},
    {Py_tp_methods, Replay_methods},
    {Py_tp_getset, Replay_getset},
    {Py_tp_members, Replay_members},
    {Py_tp_getattro, reinterpret_cast<void *>(Replay_getattro)},
    {Py_tp_setattro, reinterpret_cast<void *>(PyObject_GenericSetAttr)},
    {0, nullptr},
};

PyType_Spec Replay_spec = {
    "xla_bridge._replay.Replay", sizeof(Replay), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL, Replay_slots,
};

PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "xla_bridge._replay",
    "The common replay call of torchxla_trace_once in C++ (optional: the bridge falls back to Python).", -1,
};

}  // namespace

PyMODINIT_FUNC PyInit__replay(void) {
    if (THPVariableClass == nullptr) {
        PyErr_SetString(PyExc_ImportError, "xla_bridge._replay: import torch first");
        return nullptr;
    }
    str_run_cached_graph = PyUnicode_InternFromString("_run_cached_graph");
    str_active = PyUnicode_InternFromString("active");
    str_replays = PyUnicode_InternFromString("replays");
    str_handed = PyUnicode_InternFromString("handed");
    str_current_level = PyUnicode_InternFromString("_current_level");
    PyObject *forward_ad = PyImport_ImportModule("torch.autograd.forward_ad");
    if (forward_ad == nullptr || str_current_level == nullptr)
        return nullptr;
    forward_ad_dict = Py_NewRef(PyModule_GetDict(forward_ad));
    Py_DECREF(forward_ad);
    if (str_run_cached_graph == nullptr || str_active == nullptr || str_replays == nullptr || str_handed == nullptr)
        return nullptr;
    PyObject *module = PyModule_Create(&module_def);
    if (module == nullptr)
        return nullptr;
    PyObject *replay = PyType_FromSpec(&Replay_spec);
    if (replay == nullptr || PyModule_AddObjectRef(module, "Replay", replay) < 0) {
        Py_XDECREF(replay);
        Py_DECREF(module);
        return nullptr;
    }
    Py_DECREF(replay);
    entry_type = reinterpret_cast<PyTypeObject *>(PyType_FromSpec(&Entry_spec));
    if (entry_type == nullptr || PyModule_AddObjectRef(module, "Entry", reinterpret_cast<PyObject *>(entry_type)) < 0) {
        Py_DECREF(module);
        return nullptr;
    }
    return module;
}
