"""Switches of the XLA bridge (module attributes, read when a graph is compiled).

``cache_host_weights`` (default False): keep the device copy of a host-resident weight across
calls while the same tensor object comes back with the same ``_version``, instead of copying it
to the device on every call.

    RISK: a weight changed without bumping ``_version`` is then served stale, silently: writes
    through ``.data`` (``m.weight.data.fill_(0)``, ``.data.copy_(...)``), through a numpy view
    (``m.weight.detach().numpy()[:] = ...``), by loading a checkpoint into ``.data``, or by
    any code that writes the storage behind PyTorch's back. Only turn it on when nothing
    changes weights that way, and prefer moving the model to the XLA device instead
    (``model.to(xla_device)``): device weights are never copied and always current.

"Weights" are ``nn.Parameter`` tensors and, for graphs that read module state themselves
(``torch.fx.symbolic_trace`` graphs), the parameters and registered buffers of the module
(``symbolic_trace`` registers a plain tensor attribute it reads as a buffer: it counts too).
Every other host tensor is still copied on every call: data inputs, and for minidynamo's graphs
(which pass all module state as plain arguments) buffers and plain tensor attributes too. A backend call can also say it per graph:
``xla_bridge.torchxla_trace_once(gm, example_inputs, cache_host_weights=True)`` (through
minidynamo: ``minidynamo.optimize(functools.partial(xla_bridge.torchxla_trace_once,
cache_host_weights=True))``). The flag is read when a graph is compiled.

What it saves: the per-call copy of every host weight (``python -m bench.host_data_cost``
measures it; see ``bench/README.md``).
"""

cache_host_weights = False

# Let the common replay call run in C++ (``replay_path``; when the extension is built). Off:
# every call takes the Python path (the reference the C++ path is tested against).
native_replay = True
