"""The one error a model that cannot be planned raises."""

from __future__ import annotations


class ModelConfigError(ValueError):
    """A model the planner cannot size, in one line: what is missing and where it looked.

    A ValueError, so every caller that already turns a bad model into a one-line message (the
    preflight's ``cannot predict: ...``, argparse's ``error:``) shows it unchanged.
    """
