"""``python -m newsflow.cli ...`` runs the ``newsflow`` command line."""

import sys

from newsflow.cli.main import main

sys.exit(main())
