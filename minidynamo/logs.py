"""One switch to see everything: ``MINIDYNAMO_LOG=graph,guards,bytecode,recompiles,fallbacks,graph_breaks,output_code``.

Each topic is a logger ``minidynamo.<topic>``; a topic named in the variable (or ``all``) is
printed to stderr at DEBUG level.
"""

from __future__ import annotations

import logging
import sys

from . import config

TOPICS = ("graph", "guards", "bytecode", "recompiles", "fallbacks", "graph_breaks", "output_code")


def get_logger(topic: str) -> logging.Logger:
    return logging.getLogger(f"minidynamo.{topic}")


def enable(spec: str) -> None:
    """Turn on the topics in a comma-separated spec (``"all"`` turns on every topic)."""
    wanted = {t.strip() for t in spec.split(",") if t.strip()}
    if "all" in wanted:
        wanted = set(TOPICS)
    for topic in wanted & set(TOPICS):
        logger = get_logger(topic)
        logger.setLevel(logging.DEBUG)
        if not logger.handlers:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter(f"[minidynamo.{topic}] %(message)s"))
            logger.addHandler(handler)
            logger.propagate = False


enable(config.log)
