"""``python -m bench``: see ``bench/__init__.py``; ``python -m bench --training``: see
``bench/training.py``."""

import sys

if "--training" in sys.argv[1:]:
    from bench.training import main as training_main

    raise SystemExit(training_main([a for a in sys.argv[1:] if a != "--training"]))

from bench.runner import main

raise SystemExit(main())
