"""Graph breaks, the code-generation side (the tracer's side is ``tracer/graph_break.py``).

| module | one idea |
|---|---|
| ``entry.py`` | the compiled entry of a broken frame: graph, rebuilt values, the eager instruction, the resume call |
| ``resume_code.py`` | resume functions: the rest of the original bytecode behind a prologue, made with ``bytecode`` |

See docs/graph-breaks.md.
"""
