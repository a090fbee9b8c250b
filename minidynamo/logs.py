"""One switch to see everything: ``MINIDYNAMO_LOG=trace,graph,guards,output_code,graph_breaks`` (or ``all``).

Each topic is a logger ``minidynamo.<topic>``; a topic named in the variable (or ``all``) is
printed to stderr at DEBUG level.  The others stay silent, also when the program logs at DEBUG
itself (the ``minidynamo`` logger is at WARNING unless the program set its level).  What each
topic shows, in pipeline order:

    trace        every interpreted instruction, with the symbolic stack after it (an inlined
                 call's instructions come first, indented, then the CALL that ran them)
    graph        the captured fx graph; each node says which line of user code made it
    guards       the generated guard function; each check says which line needed it
    output_code  what replaces the frame on a hit: the input reader and ``compiled_fn``
    xla          the XLA bridge (logger ``minidynamo.xla``, used by ``xla_bridge`` without
                 importing minidynamo): graph hash, lazy IR, input plan, replays and retraces
    recompiles   which guard failed, in words, when a code object is compiled again
    fallbacks    why a frame runs eagerly
    graph_breaks each graph break: where, which instruction runs eagerly, and why

``bytecode`` is the old name of ``trace``.
"""

from __future__ import annotations

import logging
import sys

from . import config

# the XLA bridge logs to ``minidynamo.xla`` from ``xla_bridge/log.py`` (it never imports minidynamo)
TOPICS = ("trace", "graph", "guards", "output_code", "xla", "recompiles", "fallbacks", "graph_breaks")
ALIASES = {"bytecode": "trace"}


def get_logger(topic: str) -> logging.Logger:
    return logging.getLogger(f"minidynamo.{topic}")


def topics_in(spec: str) -> set:
    """The topics a comma-separated spec names (``"all"``: every topic; unknown names ignored)."""
    wanted = {ALIASES.get(t.strip(), t.strip()) for t in spec.split(",") if t.strip()}
    return set(TOPICS) if "all" in wanted else wanted & set(TOPICS)


def enable(spec: str) -> None:
    """Turn on the topics in a comma-separated spec (``"all"`` turns on every topic)."""
    for topic in topics_in(spec):
        logger = get_logger(topic)
        logger.setLevel(logging.DEBUG)
        if not logger.handlers:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter(f"[minidynamo.{topic}] %(message)s"))
            logger.addHandler(handler)
            logger.propagate = False


def quiet_by_default() -> None:
    """The topics stay silent unless named (``enable``) or unless the program gives the
    ``minidynamo`` logger a level itself: a program that turns DEBUG on for its root logger
    (``logging.basicConfig(level=logging.DEBUG)``) would otherwise get every traced instruction
    among its own records, and pay for formatting each one."""
    parent = logging.getLogger("minidynamo")
    if parent.level == logging.NOTSET:
        parent.setLevel(logging.WARNING)


quiet_by_default()
enable(config.log)
