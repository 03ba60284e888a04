"""The one base of every error a user sees."""

from __future__ import annotations


class SparkscopeError(Exception):
    """Something the user can act on. The message says what happened and what to
    do next; `sparkscope` prints it as it is (no traceback) and exits 1."""


class UsageError(SparkscopeError):
    """Options that cannot go together, found after argparse: exits 2, as argparse's own errors."""
