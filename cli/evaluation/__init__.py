"""Evaluation metrics and the ``newsflow eval`` commands."""
