#pragma once

/* Part of guards/_tensor_match.cpp: the direct check of a plain tensor as a few word compares.
 *
 * A plain c10::TensorImpl keeps every field the direct check reads, requires_grad aside (that
 * one is in its autograd meta), in two runs of words: the dimension count with the sizes and
 * strides after it (inline up to five dimensions), and a "tail" from its dtype to its dispatch
 * keys (device, the contiguity and layout flags, the policies that would send a getter
 * elsewhere).  When a tensor passes the full direct check, its spec keeps the tail.  A later
 * tensor whose vtable is the plain one, whose count and sizes (and strides) are the spec's and
 * whose tail is the kept one holds the very field values that passed, so it passes too.
 * Anything else takes the full check (which may keep a new tail): the shortcut never says no.
 *
 * The words' places are found once, from probe tensors, through the public getters and the
 * fields a subclass may name; if any of it is not as expected the shortcut stays off. */

namespace {

constexpr size_t kInlineImplDims = 5;   // C10_SIZES_AND_STRIDES_MAX_INLINE_SIZE

struct ImplWords {
    bool usable = false;
    uint64_t vtable = 0;                   // c10::TensorImpl's own
    size_t meta = 0;                       // 0: read through impl->autograd_meta()
    size_t count = 0, sizes = 0, strides = 0, tail = 0, tail_words = 0;   // word indexes
};
ImplWords impl_words;

/* What a subclass of TensorImpl may read: where two protected fields are, and the policy flags. */
struct ImplFields : c10::TensorImpl {
    static const void *dtype_field(const c10::TensorImpl *impl) { return &(impl->*(&ImplFields::data_type_)); }
    static const void *key_set_field(const c10::TensorImpl *impl) { return &(impl->*(&ImplFields::key_set_)); }
    static c10::IntArrayRef default_sizes(const c10::TensorImpl *impl) { return (impl->*(&ImplFields::sizes_default))(); }
    static c10::IntArrayRef default_strides(const c10::TensorImpl *impl) { return (impl->*(&ImplFields::strides_default))(); }
    /* Every getter the check uses answers from the impl's own fields, with no virtual call. */
    bool default_policies() const {
        return sizes_strides_policy_ == 0 && !device_policy_ && !layout_policy_ && !has_symbolic_sizes_strides_;
    }
};

inline const uint64_t *words_of(const c10::TensorImpl *impl) {
    return reinterpret_cast<const uint64_t *>(impl);
}

/* The word index of a field of `impl`, or -1 when it is not word-aligned inside it. */
ptrdiff_t word_index(const c10::TensorImpl *impl, const void *field) {
    ptrdiff_t bytes = static_cast<const char *>(field) - reinterpret_cast<const char *>(impl);
    if (bytes <= 0 || bytes % 8 != 0 || static_cast<size_t>(bytes) >= sizeof(c10::TensorImpl))
        return -1;
    return bytes / 8;
}

/* A tensor's words may stand for its check: a plain impl, default policies, inline sizes. */
bool words_apply(const c10::TensorImpl *impl) {
    return impl_words.usable && words_of(impl)[0] == impl_words.vtable && impl->dim() <= static_cast<int64_t>(kInlineImplDims) &&
           static_cast<const ImplFields *>(impl)->default_policies();
}

void keep_tail(Spec &spec, const c10::TensorImpl *impl) {
    const uint64_t *tail = words_of(impl) + impl_words.tail;
    std::copy(tail, tail + impl_words.tail_words, spec.seen_tail);
    spec.seen = true;
}

/* impl->autograd_meta(), read inline (the call is out of line). */
inline const c10::AutogradMetaInterface *autograd_meta_of(const c10::TensorImpl *impl) {
    if (impl_words.meta == 0)
        return impl->autograd_meta();
    return reinterpret_cast<const c10::AutogradMetaInterface *>(words_of(impl)[impl_words.meta]);
}

/* True when `impl` holds the field values that last passed `spec` (requires_grad aside). */
inline bool seen_before(const Spec &spec, const c10::TensorImpl *impl) {
    const uint64_t *words = words_of(impl);
    size_t n = spec.sizes_value.n;
    const int64_t *sizes = spec.sizes_value.data();
    uint64_t differ = (words[0] ^ impl_words.vtable) | (words[impl_words.count] ^ n);
    for (size_t i = 0; i < n; i++)   // (no early exit: a branch per word costs more than the loads)
        differ |= words[impl_words.sizes + i] ^ static_cast<uint64_t>(sizes[i]);
    if (!spec.by_contiguity) {
        const int64_t *strides = spec.strides_value.data();
        for (size_t i = 0; i < n; i++)
            differ |= words[impl_words.strides + i] ^ static_cast<uint64_t>(strides[i]);
    }
    for (size_t t = 0; t < impl_words.tail_words; t++)
        differ |= words[impl_words.tail + t] ^ spec.seen_tail[t];
    return differ == 0;
}

/* The word that holds the autograd meta (before the sizes): the only word of a leaf that
 * requires grad holding its meta's address, and empty in a tensor without one. */
void find_meta_word() {
    at::Tensor leaf = at::empty({1}).requires_grad_(), bare = at::empty({1});
    const c10::TensorImpl *impl = leaf.unsafeGetTensorImpl();
    const uint64_t *words = words_of(impl), *bare_words = words_of(bare.unsafeGetTensorImpl());
    const auto meta = reinterpret_cast<uint64_t>(impl->autograd_meta());
    ptrdiff_t sizes = word_index(impl, impl->sizes().data());
    size_t found = 0, count = 0;
    for (ptrdiff_t i = 1; i < sizes; i++) {
        if (words[i] == meta) {
            found = static_cast<size_t>(i);
            count++;
        }
    }
    if (meta != 0 && count == 1 && bare_words[found] == 0 && bare.unsafeGetTensorImpl()->autograd_meta() == nullptr)
        impl_words.meta = found;
}

/* Find the words from probes: a 4x3x2 float tensor (strides 6, 2, 1) and its double twin. */
void find_impl_words() {
    find_meta_word();
    at::Tensor probe = at::empty({4, 3, 2}), twin = at::empty({4, 3, 2}, at::kDouble);
    const c10::TensorImpl *impl = probe.unsafeGetTensorImpl();
    if (typeid(*impl) != typeid(c10::TensorImpl) || !static_cast<const ImplFields *>(impl)->default_policies())
        return;
    ptrdiff_t sizes = word_index(impl, impl->sizes().data()), strides = word_index(impl, impl->strides().data());
    ptrdiff_t tail = word_index(impl, ImplFields::dtype_field(impl)), keys = word_index(impl, ImplFields::key_set_field(impl));
    const uint64_t *words = words_of(impl);
    if (sizes < 1 || strides != sizes + static_cast<ptrdiff_t>(kInlineImplDims) || tail < strides + 3 || keys < tail ||
        static_cast<size_t>(keys - tail + 1) > kMaxTailWords || words[sizes - 1] != 3)
        return;
    const int64_t expected[] = {4, 3, 2, 6, 2, 1};
    for (int i = 0; i < 3; i++) {
        if (words[sizes + i] != static_cast<uint64_t>(expected[i]) || words[strides + i] != static_cast<uint64_t>(expected[3 + i]))
            return;
    }
    impl_words.vtable = words[0];
    impl_words.count = static_cast<size_t>(sizes - 1);
    impl_words.sizes = static_cast<size_t>(sizes);
    impl_words.strides = static_cast<size_t>(strides);
    impl_words.tail = static_cast<size_t>(tail);
    impl_words.tail_words = static_cast<size_t>(keys - tail + 1);
    // The dtype must be in the tail: the twin differs from the probe there.
    const uint64_t *twin_words = words_of(twin.unsafeGetTensorImpl());
    impl_words.usable = !std::equal(words + tail, words + keys + 1, twin_words + tail);
}

}  // namespace
