"""``python -m capmatrix``."""

import sys

from capmatrix.authoring.cli import main

sys.exit(main())
