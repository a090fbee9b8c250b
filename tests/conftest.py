"""Suite-wide settings: XLA runs on the CPU (with the bridge's flags, whichever test starts the
runtime first), and every test starts with empty caches."""

import os

from xla_bridge.device import ask_for_eager_faithful_flags

os.environ.setdefault("PJRT_DEVICE", "CPU")
ask_for_eager_faithful_flags()
