/*
 * copy_exact(s): a new set with the very hash table of the set `s` (its size, slots, deleted
 * slots), so it iterates, grows and pops exactly as `s` would.
 *
 * A set's iteration order is its table's order, and the table depends on the set's history
 * (how it grew, what was removed), not only on its items: `set(items)` or `s.copy()` may build
 * a table of another size, with its items in other slots.  A set the tracer made, handed on at
 * a graph break or returned, is rebuilt on every call from a snapshot with this copy, so the
 * program iterates it in the order eager would (see tracer/templates.py, "set" templates).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

static PyObject *copy_exact(PyObject *module, PyObject *arg) {
    if (!PySet_CheckExact(arg)) {
        PyErr_Format(PyExc_TypeError, "copy_exact: expected a set, got %.100s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    PySetObject *from = (PySetObject *)arg;
    PySetObject *copy = (PySetObject *)PySet_New(NULL);
    if (copy == NULL) return NULL;
    Py_ssize_t size = from->mask + 1;
    setentry *table = copy->smalltable;
    if (from->table != from->smalltable) {
        table = PyMem_New(setentry, size);
        if (table == NULL) {
            Py_DECREF(copy);
            return PyErr_NoMemory();
        }
    }
    memcpy(table, from->table, size * sizeof(setentry));
    for (Py_ssize_t i = 0; i < size; i++) {
        if (table[i].key != NULL && table[i].key != _PySet_Dummy)   /* deleted slots hold no reference */
            Py_INCREF(table[i].key);
    }
    copy->table = table;
    copy->mask = from->mask;
    copy->fill = from->fill;
    copy->used = from->used;
    copy->finger = from->finger;
    return (PyObject *)copy;
}

static PyMethodDef methods[] = {
    {"copy_exact", copy_exact, METH_O, "A new set with the same hash table as the given set (same order, growth, pops)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_set_table", NULL, -1, methods};

PyMODINIT_FUNC PyInit__set_table(void) { return PyModule_Create(&module); }
