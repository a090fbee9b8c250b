#pragma once

/* Part of guards/_tensor_match.cpp: which tensors share one storage (guards.storage_match).
 *
 *     StorageGroups(groups)(*tensors) -> bool
 *
 * answers as guards.guard.PyStorageGroups, from each TensorImpl's storage pointer: `groups` gives,
 * for each tensor, the position of the first tensor in the same storage (its own when none
 * before it shares one).  A tensor without a readable storage shares with none, as
 * `untyped_storage()` raising does there; anything not a tensor answers False.
 *
 * No table of all positions is built.  The sharing is `groups`' exactly when each tensor that
 * `groups` puts after another is in that one's storage, and the first tensors of the groups are
 * in different storages: then no tensor meets its storage earlier than `groups` says. */

namespace {

/* The StorageImpl `tensor`'s storage is, or nullptr when it has none to read. */
inline const void *storage_of(PyObject *tensor) {
    try {
        const c10::TensorImpl *impl = THPVariable_Unpack(tensor).unsafeGetTensorImpl();
        if (impl == c10::UndefinedTensorImpl::singleton() || !impl->has_storage())
            return nullptr;
        return impl->storage().unsafeGetStorageImpl();
    } catch (...) {   // a wrapper whose storage may not be read: as untyped_storage() raising
        return nullptr;
    }
}

/* A set of addresses, open addressing in a table sized for `n` (on the stack up to kOnStack). */
class AddressSet {
  public:
    explicit AddressSet(size_t n) {
        size_t size = 16;
        while (size < 2 * n)
            size <<= 1;
        if (size > kOnStack) {
            heap_.assign(size, nullptr);
            slots_ = heap_.data();
        } else {
            std::fill(stack_, stack_ + size, nullptr);
        }
        mask_ = size - 1;
    }

    /* False when `address` was already in the set. */
    bool insert(const void *address) {
        size_t i = (reinterpret_cast<uintptr_t>(address) >> 4) * 0x9E3779B97F4A7C15ull >> 32 & mask_;
        while (slots_[i] != nullptr) {
            if (slots_[i] == address)
                return false;
            i = (i + 1) & mask_;
        }
        slots_[i] = address;
        return true;
    }

  private:
    static constexpr size_t kOnStack = 512;
    const void *stack_[kOnStack];
    std::vector<const void *> heap_;
    const void **slots_ = stack_;
    size_t mask_;
};

struct StorageGroups {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    std::vector<Py_ssize_t> *groups;
};

PyObject *StorageGroups_vectorcall(PyObject *self_obj, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    const std::vector<Py_ssize_t> &groups = *reinterpret_cast<StorageGroups *>(self_obj)->groups;
    size_t n = PyVectorcall_NARGS(nargsf);
    if (n != groups.size() || (kwnames != nullptr && PyTuple_GET_SIZE(kwnames) != 0))
        Py_RETURN_FALSE;
    constexpr size_t kOnStack = 256;
    const void *on_stack[kOnStack];
    std::vector<const void *> on_heap(n > kOnStack ? n : 0);
    const void **storages = n > kOnStack ? on_heap.data() : on_stack;
    AddressSet firsts(n);
    for (size_t i = 0; i < n; i++) {
        if (!THPVariable_Check(args[i]))
            Py_RETURN_FALSE;
        const void *storage = storages[i] = storage_of(args[i]);
        size_t group = static_cast<size_t>(groups[i]);
        bool holds = group == i ? storage == nullptr || firsts.insert(storage)
                                : storage != nullptr && storage == storages[group];
        if (!holds)
            Py_RETURN_FALSE;
    }
    Py_RETURN_TRUE;
}

PyObject *StorageGroups_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *items;
    if (!PyArg_ParseTuple(args, "O!:StorageGroups", &PyTuple_Type, &items))
        return nullptr;
    auto groups = std::make_unique<std::vector<Py_ssize_t>>();
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(items); i++) {
        Py_ssize_t group = PyLong_AsSsize_t(PyTuple_GET_ITEM(items, i));
        if (group == -1 && PyErr_Occurred())
            return nullptr;
        // each entry a first position: its own, or an earlier one that is its group's own
        if (group < 0 || group > i || (group < i && (*groups)[group] != group)) {
            PyErr_SetString(PyExc_ValueError, "StorageGroups: each entry is the position of its group's first tensor");
            return nullptr;
        }
        groups->push_back(group);
    }
    auto *self = reinterpret_cast<StorageGroups *>(type->tp_alloc(type, 0));
    if (self == nullptr)
        return nullptr;
    self->vectorcall = StorageGroups_vectorcall;
    self->groups = groups.release();
    return reinterpret_cast<PyObject *>(self);
}

void StorageGroups_dealloc(PyObject *self_obj) {
    auto *self = reinterpret_cast<StorageGroups *>(self_obj);
    PyTypeObject *type = Py_TYPE(self_obj);
    delete self->groups;
    type->tp_free(self_obj);
    Py_DECREF(type);
}

PyMemberDef StorageGroups_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(StorageGroups, vectorcall), READONLY, nullptr},
    {nullptr},
};

PyType_Slot StorageGroups_slots[] = {
    {Py_tp_doc, const_cast<char *>("StorageGroups(groups)(*tensors) -> bool: the tensors share storages as "
                                    "`groups` (each one's first position in its storage) says")},
    {Py_tp_new, reinterpret_cast<void *>(StorageGroups_new)},
    {Py_tp_call, reinterpret_cast<void *>(PyVectorcall_Call)},
    {Py_tp_dealloc, reinterpret_cast<void *>(StorageGroups_dealloc)},
    {Py_tp_members, StorageGroups_members},
    {0, nullptr},
};

PyType_Spec StorageGroups_spec = {
    "guards._tensor_match.StorageGroups", sizeof(StorageGroups), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL, StorageGroups_slots,
};

}  // namespace
