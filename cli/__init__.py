"""The ``newsflow`` command line: the one package that sits on top of every tier.

``newsflow.cli.main`` holds the command table and the dispatcher; ``newsflow.cli.demo`` and ``newsflow.cli.run`` are the
commands that launch the streaming job. Tier-specific commands stay in their tier's package
(``cli/``, ``cli/serve.py``, ``jobs/``, ``cli/evaluation/``) and import only
downward; this package is the only place that names them all. Run ``python -m newsflow.cli`` or the
``newsflow`` console script.
"""
