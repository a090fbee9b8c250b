#pragma once

/* Part of guards/_tensor_match.cpp: torch_xla's device tensor, read without its virtual getters.
 *
 * A device tensor is a functional wrapper around torch_xla's XLATensorImpl.  That impl answers
 * sizes(), strides() and dim() through virtual calls that first refresh its fields from its lazy
 * tensor (SetupSizeProperties: when the lazy tensor's generation differs from the one the impl
 * last copied, the sizes and strides are copied anew), and is_contiguous() with "true".  Read in
 * torch_xla's tensor_impl.h/.cpp at v2.9.0:
 *
 *     class XLATensorImpl : public c10::TensorImpl {
 *         XLATensorPtr tensor_;                    // right after the base
 *         std::vector<c10::SymInt> sym_sizes_;
 *         size_t generation_;                      // the lazy tensor's generation last copied
 *     };
 *
 * and the lazy tensor is a torch::lazy::LazyTensor (torch's header: its one field is `data_`, a
 * shared pointer to a Data holding `generation`).  So where the two generations are equal the
 * refresh would do nothing, and the impl's own fields are what the getters return: read directly,
 * with three loads and no call.  Where they differ the virtual getter runs (and refreshes).
 *
 * Only under torch_xla 2.9.x, for an impl of exactly XLATensorImpl's dynamic type, and only once
 * the layout is confirmed on the first such impl against torch's own accessors
 * (LazyTensor::data(), generation()); else every read asks the virtual getters. */

#include <torch/csrc/lazy/core/tensor.h>

namespace {

/* A functional wrapper (torch_xla's device tensors; torch knows one by this key) answers sizes,
 * strides, contiguity and device with the wrapped tensor's, each through a virtual call: the
 * wrapped tensor is asked directly (a fifth of a device tensor's check). */
inline bool is_wrapper(const c10::TensorImpl *impl) {
    return impl->key_set().has(c10::DispatchKey::Functionalize);
}

inline const c10::TensorImpl *shape_of(const c10::TensorImpl *wrapper) {
    return static_cast<const at::FunctionalTensorWrapper *>(wrapper)->value().unsafeGetTensorImpl();
}

static_assert(sizeof(torch::lazy::LazyTensor) ==
                  sizeof(c10::intrusive_ptr_target) + sizeof(std::shared_ptr<torch::lazy::LazyTensor::Data>),
              "LazyTensor's one field is data_, after its base");

struct XlaLayout {
    const void *vtable = nullptr;   // XLATensorImpl's, once seen under torch_xla 2.9
    bool ruled_out = false;         // torch_xla is not 2.9: always ask the getters
    bool fields = false;            // the generation fields below were confirmed
    size_t tensor = sizeof(c10::TensorImpl);                                       // tensor_
    size_t impl_generation = sizeof(c10::TensorImpl) + sizeof(void *) + sizeof(std::vector<c10::SymInt>);
    size_t data = sizeof(c10::intrusive_ptr_target);                               // LazyTensor::data_
    size_t data_generation = 0;                                                    // Data::generation
};
XlaLayout xla_layout;

/* torch_xla's __version__ starts with "2.9.", read from the module's dict (no Python runs). */
bool torch_xla_is_2_9() {
    PyObject *module = PyDict_GetItemString(PyImport_GetModuleDict(), "torch_xla");
    PyObject *version = module != nullptr && PyModule_Check(module) ? PyDict_GetItemString(PyModule_GetDict(module), "__version__") : nullptr;
    const char *text = version != nullptr && PyUnicode_Check(version) ? PyUnicode_AsUTF8(version) : nullptr;
    if (text == nullptr)
        PyErr_Clear();
    return text != nullptr && std::strncmp(text, "2.9.", 4) == 0;
}

template <typename T>
inline T word_at(const void *object, size_t offset) {
    return *reinterpret_cast<const T *>(static_cast<const char *>(object) + offset);
}

size_t data_generation_offset() {
    alignas(torch::lazy::LazyTensor::Data) char probe[sizeof(torch::lazy::LazyTensor::Data)];
    auto *data = reinterpret_cast<torch::lazy::LazyTensor::Data *>(probe);   // (only an address is taken)
    return static_cast<size_t>(reinterpret_cast<char *>(&data->generation) - probe);
}

/* The generation fields where the headers put them, confirmed on a live impl: right after a
 * refresh its generation_ is its lazy tensor's, and data_ is what LazyTensor::data() returns. */
bool confirm_generation_fields(const c10::TensorImpl *impl) {
    xla_layout.data_generation = data_generation_offset();
    (void)impl->sizes();                                   // the virtual getter: a refresh
    const auto *lazy = word_at<const torch::lazy::LazyTensor *>(impl, xla_layout.tensor);
    if (lazy == nullptr || reinterpret_cast<uintptr_t>(lazy) % alignof(torch::lazy::LazyTensor) != 0)
        return false;
    const torch::lazy::LazyTensor::Data *data = lazy->data().get();
    if (data == nullptr || word_at<const void *>(lazy, xla_layout.data) != data)
        return false;
    size_t generation = lazy->generation();
    return generation != 0 && word_at<size_t>(data, xla_layout.data_generation) == generation &&
           word_at<size_t>(impl, xla_layout.impl_generation) == generation;
}

/* The first time: is `shape` torch_xla 2.9's XLATensorImpl (then its layout is confirmed)? */
bool detect_xla_impl(const c10::TensorImpl *shape) {
    const void *vtable = *reinterpret_cast<const void *const *>(shape);
    if (xla_layout.vtable != nullptr || xla_layout.ruled_out ||
        std::strcmp(typeid(*shape).name(), "N9torch_xla13XLATensorImplE") != 0)
        return false;
    if (!torch_xla_is_2_9()) {
        xla_layout.ruled_out = true;
        return false;
    }
    xla_layout.vtable = vtable;
    try {
        xla_layout.fields = confirm_generation_fields(shape);
    } catch (...) {
        xla_layout.fields = false;
    }
    return true;
}

/* `shape` (a wrapped impl) is torch_xla 2.9's XLATensorImpl. */
inline bool is_xla_impl(const c10::TensorImpl *shape) {
    return *reinterpret_cast<const void *const *>(shape) == xla_layout.vtable || detect_xla_impl(shape);
}

/* The impl's sizes are current: its lazy tensor's generation is the one it copied last. */
inline bool xla_sizes_current(const c10::TensorImpl *shape) {
    if (!xla_layout.fields)
        return false;
    const void *lazy = word_at<const void *>(shape, xla_layout.tensor);
    const void *data = lazy != nullptr ? word_at<const void *>(lazy, xla_layout.data) : nullptr;
    return data != nullptr && word_at<size_t>(data, xla_layout.data_generation) == word_at<size_t>(shape, xla_layout.impl_generation);
}

/* Ask for the lines xla_sizes_current reads next: the lazy tensor's data_ (`step` 0), then its
 * Data's generation (`step` 1); the lines before were asked for earlier.  A prefetch cannot fault. */
inline void prefetch_generation(const c10::TensorImpl *shape, int step) {
    if (!xla_layout.fields || *reinterpret_cast<const void *const *>(shape) != xla_layout.vtable)
        return;
    const char *lazy = word_at<const char *>(shape, xla_layout.tensor);
    if (lazy == nullptr)
        return;
    if (step == 0) {
        __builtin_prefetch(lazy + xla_layout.data);
        return;
    }
    const char *data = word_at<const char *>(lazy, xla_layout.data);
    if (data != nullptr)
        __builtin_prefetch(data + xla_layout.data_generation);
}

}  // namespace
