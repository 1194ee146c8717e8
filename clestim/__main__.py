"""``python -m clestim``: the same as the ``clestim`` command."""

import sys

from .cli import main

sys.exit(main())
