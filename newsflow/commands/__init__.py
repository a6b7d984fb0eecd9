"""CLI command modules (see ``newsflow.cli``)."""
