"""The one base of every error a user sees."""

from __future__ import annotations


class SparkscopeError(Exception):
    """Something the user can act on. The message says what happened and what to
    do next; `sparkscope` prints it as it is (no traceback) and exits 2."""
