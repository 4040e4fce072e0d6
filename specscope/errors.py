"""Expected failures: each becomes one line on stderr and a non-zero exit in the CLI."""

from __future__ import annotations


class SpecscopeError(Exception):
    """A problem with the user's input or environment, with the fix in the message.

    The CLI prints ``error: <message>`` and exits with ``exit_code`` (2 = bad input or usage),
    never a traceback.
    """

    exit_code = 2


class TraceError(SpecscopeError):
    """The trace file is missing, unreadable, not SQLite, corrupt, or not an nsys export."""


class SpecError(SpecscopeError):
    """The step spec does not match the trace (no such range, no steps left, ...)."""


class Info(str):
    """A note that informs rather than warns (``skipped 1 warm-up step(s)``): still a ``str``
    in an analysis's notes (JSON, the results database), printed as ``note:`` by the CLI where
    other notes are ``warning:``."""

    __slots__ = ()
