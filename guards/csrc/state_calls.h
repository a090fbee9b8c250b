#pragma once

/* Part of guards/_tensor_match.cpp: a guard's calls of torch's global-state getters, answered
 * from the state itself instead of through a Python call.
 *
 * Every guard of a captured frame checks the state the graph was traced under:
 *     torch.is_grad_enabled() is True
 *     torch.get_default_dtype() is torch.float32
 *     torch._C._is_any_autocast_enabled() is False
 * Through Python each is a call (20-50 ns; the autocast one builds a vector of devices).  Here:
 *   - grad mode is c10's thread-local flag;
 *   - the default dtype is c10's, and a torch.dtype object is the one object of its scalar type,
 *     so `get_default_dtype() is expected` is "the scalar types are equal";
 *   - autocast on any device is a function of the thread's dispatch-key sets alone (a device's
 *     autocast is on when its Autocast key is not excluded), so the getter's answer is kept with
 *     the two key-set words it was given for, and asked again only when they differ.
 * (tests/guards/test_guard_kinds_state.py flips each state and compares with Python's answer.) */

namespace {

enum StateCall { NOT_A_STATE_CALL, GRAD_ENABLED, DEFAULT_DTYPE, ANY_AUTOCAST };

PyObject *builtin_get_default_dtype;      // torch._C.get_default_dtype (torch.get_default_dtype)
PyObject *builtin_any_autocast_enabled;   // torch._C._is_any_autocast_enabled

/* The autocast getter's last answer and the thread's dispatch-key words it was given for. */
struct StateMemo {
    uint64_t included = 0, excluded = 0;
    int answer = -1;   // -1: none yet
};

StateCall state_call_of(PyObject *fn, PyObject *expected) {
    if (fn == builtin_is_grad_enabled)
        return GRAD_ENABLED;
    if (fn == builtin_get_default_dtype && THPDtype_Check(expected))
        return DEFAULT_DTYPE;
    if (fn == builtin_any_autocast_enabled && PyBool_Check(expected))
        return ANY_AUTOCAST;
    return NOT_A_STATE_CALL;
}

/* `fn() is expected` for a state call: 1, 0, or -1 on error. */
int state_call_is(StateCall which, PyObject *fn, PyObject *expected, StateMemo &memo) {
    switch (which) {
    case GRAD_ENABLED:
        return (c10::GradMode::is_enabled() ? Py_True : Py_False) == expected;
    case DEFAULT_DTYPE:
        return c10::get_default_dtype_as_scalartype() == reinterpret_cast<THPDtype *>(expected)->scalar_type;
    case ANY_AUTOCAST: {
        const c10::impl::PODLocalDispatchKeySet &keys = c10::impl::raw_local_dispatch_key_set;
        if (memo.answer < 0 || keys.included_ != memo.included || keys.excluded_ != memo.excluded) {
            PyObject *got = PyObject_Vectorcall(fn, nullptr, 0, nullptr);
            if (got == nullptr)
                return -1;
            Py_DECREF(got);
            if (!PyBool_Check(got))
                return got == expected;   // (not kept: only a bool answer is a state)
            memo.included = keys.included_;
            memo.excluded = keys.excluded_;
            memo.answer = got == Py_True;
        }
        return (memo.answer ? Py_True : Py_False) == expected;
    }
    default:
        return -1;
    }
}

}  // namespace
