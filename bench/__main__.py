"""``python -m bench``: see ``bench/__init__.py``."""

from bench.runner import main

raise SystemExit(main())
