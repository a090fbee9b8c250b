"""Settings: ``minidynamo.config.cache_size_limit = 4`` takes effect on the next compile.
``log`` is read once, at import (set ``MINIDYNAMO_LOG`` before importing, or call
``minidynamo.logs.enable("graph,guards")``)."""

import os

# After this many compiled entries for one code object, the code runs eagerly from then on.
cache_size_limit = 8

# Deepest chain of inlined calls before the tracer gives up on a frame.
inline_depth_limit = 64

# Library values (torch functions, classes, and those of the standard library, timm,
# torchvision, einops) read as attributes of a library *class* (nn.Module's protocol, a library
# module class's methods) are not guarded: we assume nobody monkeypatches a library class
# between calls (docs/guard-assumptions.md).  A library module's attributes and what the tensor
# classes find are guarded always.  False guards the class lookups too.
assume_libraries_unpatched = True

# An nn.Module reached from a frame argument is guarded by its type and state instead of its
# identity when the trace relies on nothing else of it (tracer/module_sharing.py): identical
# layers compiled as separate frames share one entry.  False: every module by identity.
share_module_entries = True

# Comma-separated log topics (or "all"): trace, graph, guards, output_code, xla, recompiles, fallbacks.
log = os.environ.get("MINIDYNAMO_LOG", "")

# A compiled graph that offers its cache entry's body in C (``cache_entry_fn``: the XLA bridge's
# replay) runs it instead of the generated Python body: no Python frame on a hit, and the tensor
# checks its guard just made are not repeated.  False: the generated Python body everywhere.
native_cache_entry = True
