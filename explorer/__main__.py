"""``python -m explorer``: the same as the ``transformer-explorer`` command."""

import sys

from explorer.app import main

sys.exit(main())
