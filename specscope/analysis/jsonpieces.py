"""JSON text written in pieces, with some values already JSON text made elsewhere.

The per-step rows of an analysis are encoded by pandas' C encoder (:meth:`.Analysis
.per_step_pieces`), a chunk of steps at a time. An output that holds them inside other objects
(one export of several processes, several exports: ``{"exports": [{..., "per_step": [...]},
...], ...}``) is written by :func:`pieces` around them: no text of every step at once, and no
round trip of the rows through Python objects (``json.loads`` then ``json.dumps`` of 4
processes of 2 M GPU operations took 2.8 s, 40 % of the command).

Everything else is encoded by ``json.dumps`` with its default separators, so that an object
without :class:`Encoded` values comes out exactly as ``json.dumps`` writes it.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Iterator


class Encoded:
    """A value given as JSON text in pieces (``parts``, an iterable of str, read once)."""

    def __init__(self, parts: Iterable[str]):
        self.parts = parts


def pieces(value) -> Iterator[str]:
    """``json.dumps(value)`` in pieces, where dicts and lists may hold :class:`Encoded`
    values at any depth, whose text is passed on as it is.

    ``json.dumps`` (its C encoder, in one call) writes each :class:`Encoded` value as a string
    holding a token made for this call and the value's number; the text is then cut at those
    strings, and each value's pieces go in its place."""
    token = uuid.uuid4().hex
    encoded: list[Iterable[str]] = []

    def placeholder(obj) -> str:
        if not isinstance(obj, Encoded):
            raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")
        encoded.append(obj.parts)
        return f"{token}:{len(encoded) - 1}"

    text = json.dumps(value, default=placeholder)
    done = 0
    for match in re.finditer(f'"{token}:([0-9]+)"', text):
        yield text[done : match.start()]
        yield from encoded[int(match.group(1))]
        done = match.end()
    yield text[done:]
