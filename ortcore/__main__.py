"""``python -m ortcore``: the ortcore command line."""

import sys

from .cli import main

sys.exit(main())
