"""The bridge's log topic ``xla``: graph hashes, lazy IR, input plans, replay and retrace events.

    MINIDYNAMO_LOG=xla python my_script.py

The logger is ``minidynamo.xla``, the name ``minidynamo.logs`` gives the topic, so one switch
turns it on whether or not minidynamo is imported (the bridge never imports minidynamo: it is
a lower layer). Messages are built only when the topic is on (``%``-style arguments); off, the
logger is at WARNING, so a program logging at DEBUG itself does not get them.
"""

import logging
import os
import sys

log_xla = logging.getLogger("minidynamo.xla")


def _enable_from_environment() -> None:
    wanted = {t.strip() for t in os.environ.get("MINIDYNAMO_LOG", "").split(",")}
    if not wanted & {"xla", "all"}:
        if log_xla.level == logging.NOTSET:   # silent unless asked, as minidynamo.logs keeps its topics
            log_xla.setLevel(logging.WARNING)
        return
    log_xla.setLevel(logging.DEBUG)
    if not log_xla.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("[minidynamo.xla] %(message)s"))
        log_xla.addHandler(handler)
        log_xla.propagate = False


_enable_from_environment()
