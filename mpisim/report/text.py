"""Text from a scenario file, made safe to show: control characters escaped, Markdown/HTML inert.

A scenario's ``name`` and ``description`` are whatever its author typed, and scenario files
travel. Shown raw, an escape sequence can rewrite the terminal, and ``<img src=...>`` or a
``[link](...)`` becomes live in a rendered report.md. These helpers show such text as text;
:func:`plural` writes a count with its noun.
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-!|<>&~])")


def printable(text: object, *, keep_newlines: bool = False) -> str:
    """Return *text* with control characters (and bidi overrides) written as ``\\xNN`` / ``\\uNNNN`` escapes."""
    out = str(text)
    if not keep_newlines:
        out = out.replace("\n", "\\n")
    out = out.replace("\t", "\\t")
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}",
                        out)


def markdown_text(text: object, *, keep_newlines: bool = False) -> str:
    """Return *text* printable and inert in Markdown and HTML: every markup character backslash-escaped."""
    return _MARKDOWN.sub(r"\\\1", printable(text, keep_newlines=keep_newlines))


def plural(n: object, word: str) -> str:
    """``1 node``, ``2 nodes``: a count with its noun, singular for one."""
    return f"{n} {word}{'' if n == 1 else 's'}"
