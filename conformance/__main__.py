"""``python -m conformance --provider NAME``: see :mod:`conformance.cli`."""

import sys

from .cli import main

sys.exit(main())
