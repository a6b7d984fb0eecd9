"""``python -m cli ...`` runs the ``newsflow`` command line."""

import sys

from cli.main import main

sys.exit(main())
