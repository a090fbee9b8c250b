"""Suite-wide settings: XLA runs on the CPU, and every test starts with empty caches."""

import os

os.environ.setdefault("PJRT_DEVICE", "CPU")
