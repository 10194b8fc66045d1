"""``python -m groupd``: the broker, as the ``groupd`` console script starts it."""

import sys

from groupd.server import main

sys.exit(main())
