"""A backward graph split where eager autograd's graph falls apart: independent groups of outputs.

Eager autograd runs (and frees, and checks for in-place changes) only the nodes a grad
reaches. A replayed step is one autograd node for all its outputs, so a backward from one
output would run the whole step: backward through ``o2`` after ``o1, o2 = f(a, b)`` with
``o1 = a.sin()``, ``o2 = b.cos()`` frees what ``o1`` needs (eager lets ``o1.backward()`` run
later) and reaches ``a``'s own nodes (eager never does). So the outputs are grouped as eager's
graph groups them: two output grads (tangents) are in one group when some backward op reads
both, and each group becomes its own node with its own backward graph.

One kind of op is not a node in eager: the sum of the grads an *argument* gets from several
outputs (``w`` used by both ``o1`` and ``o2``), which the engine adds into the argument's grad
buffer. Here it is an ``aten.add`` whose users are only the graph's output and other such
sums; it does not join groups, and each group's graph keeps only its own terms of it:

    def forward(saved0, arg0, tangent0, tangent1):         # group (0,): tangent0's terms only
        g0 = mul(tangent0, saved0); g1 = mul(tangent1, arg0) # g1 belongs to group (1,)
        return (add(g0, g1),)                                # -> return (g0,)

Within one group, a backward may still come with only some of its tangents (``o1`` and
``o2 = o1.std()`` returned, the loss made from ``o1`` alone). Eager then runs no node that no
grad reaches (``std``'s backward of a zero grad is NaN, times anything), and where a node it
does run reads a grad that never came, its formula takes zeros: ``for_arrived`` is that graph.
"""

from __future__ import annotations

import torch
import torch.fx as fx

_add = torch.ops.aten.add.Tensor
_new_zeros = torch.ops.aten.new_zeros.default


def tangent_groups(backward: fx.GraphModule, tangent_count: int) -> tuple:
    """The groups of tangent indices (each sorted, groups by their first index)."""
    graph = backward.graph
    flows = _flows(graph, tangent_count)
    sums = _grad_sums(graph, flows)
    parent = list(range(tangent_count))

    def find(j):
        while parent[j] != j:
            parent[j] = parent[parent[j]]
            j = parent[j]
        return j

    for node in graph.nodes:
        if node.op == "call_function" and node not in sums and len(flows.get(node, ())) > 1:
            first, *rest = flows[node]
            for j in rest:
                parent[find(j)] = find(first)
    groups: dict = {}
    for j in range(tangent_count):
        groups.setdefault(find(j), []).append(j)
    return tuple(sorted(tuple(group) for group in groups.values()))


def restrict(backward: fx.GraphModule, group: tuple, tangent_count: int) -> fx.GraphModule:
    """``backward`` for the tangents in ``group`` only: ``(*saved, *args, *group's tangents) ->
    grads``, where each grad is this group's part of it (None when the group adds nothing)."""
    graph, kept = backward.graph, set(group)
    flows = _flows(graph, tangent_count)
    sums = _grad_sums(graph, flows)
    placeholders = [node for node in graph.nodes if node.op == "placeholder"]
    tangents = placeholders[len(placeholders) - tangent_count:]
    out, env = fx.Graph(), {}
    for node in placeholders:
        if node not in tangents or tangents.index(node) in kept:
            env[node] = out.node_copy(node, env.__getitem__)
    for node in graph.nodes:
        if node.op == "placeholder":
            continue
        if node.op == "output":
            out.output(tuple(env.get(value) if isinstance(value, fx.Node) else value
                             for value in node.args[0]))
        elif node in sums:
            terms = [env[term] for term in node.args if term in env]
            if len(terms) == len(node.args):
                env[node] = out.node_copy(node, env.__getitem__)
            elif terms:
                env[node] = terms[0]
        elif not flows.get(node) or flows[node] & kept:
            env[node] = out.node_copy(node, env.__getitem__)
    out.eliminate_dead_code()
    return fx.GraphModule(backward, out)


def for_arrived(backward: fx.GraphModule, arrived: frozenset, tangent_count: int) -> fx.GraphModule:
    """``backward`` (same inputs and outputs) when only the tangents in ``arrived`` came: the
    ops made only from the others are left out, a value they would have given is zeros where a
    kept op reads it, and a grad made only from them is None."""
    graph = backward.graph
    flows = _flows(graph, tangent_count)
    absent = {node for node, made_from in flows.items() if not made_from & arrived}
    tangents = [node for node in graph.nodes if node.op == "placeholder"][-tangent_count:]
    out, env, zeros = fx.Graph(), {}, {}

    def value(node):
        if node in env:
            return env[node]
        if node not in zeros:            # a grad that did not come: eager's formulas take zeros
            zeros[node] = out.call_function(_new_zeros, (env[tangents[min(arrived)]], list(node.meta["shape"])),
                                            {"dtype": node.meta["dtype"]})
            zeros[node].meta.update(shape=node.meta["shape"], dtype=node.meta["dtype"])
        return zeros[node]

    for node in graph.nodes:
        if node.op == "placeholder":
            env[node] = out.node_copy(node)
        elif node.op == "output":
            out.output(tuple(env.get(v) if isinstance(v, fx.Node) else v for v in node.args[0]))
        elif node not in absent:
            env[node] = out.node_copy(node, value)
    out.eliminate_dead_code()
    return fx.GraphModule(backward, out)


def _flows(graph: fx.Graph, tangent_count: int) -> dict:
    """{node: the tangents (indices) it is made from}, for nodes made from any."""
    placeholders = [node for node in graph.nodes if node.op == "placeholder"]
    start = len(placeholders) - tangent_count
    flows = {node: frozenset({j}) for j, node in enumerate(placeholders[start:])}
    for node in graph.nodes:
        if node.op == "call_function":
            made_from = frozenset().union(*(flows.get(i, frozenset()) for i in node.all_input_nodes))
            if made_from:
                flows[node] = made_from
    return flows


def _grad_sums(graph: fx.Graph, flows: dict) -> set:
    """The ``add`` nodes that only sum an argument's grad terms: two terms, each made from
    tangents, used only by the output or by other such sums."""
    sums: set = set()
    for node in reversed(graph.nodes):
        if (node.op == "call_function" and node.target is _add and not node.kwargs
                and len(node.args) == 2 and all(isinstance(a, fx.Node) and a in flows for a in node.args)
                and all(user.op == "output" or user in sums for user in node.users)):
            sums.add(node)
    return sums
