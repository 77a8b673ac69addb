"""``python -m capmatrix``."""

import sys

from capmatrix.cli import main

sys.exit(main())
