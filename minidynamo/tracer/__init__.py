"""The symbolic bytecode interpreter: a frame -> an fx graph of its tensor operations, the guards
that make the graph valid for later calls, and how to rebuild the frame's return value.

    from minidynamo.tracer import trace_frame, Capture
    capture = trace_frame(func, args)

Modules: capture (entry point), translator (opcodes), output_graph (the fx graph and its
inputs), builder (real values -> VariableTrackers + guards), operators, meta (example values),
variables/ (the VariableTracker hierarchy).
"""

from .capture import Capture, trace_frame

__all__ = ["Capture", "trace_frame"]
