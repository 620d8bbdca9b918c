"""Text from the inputs (record ids, file names, error messages) made safe for where the
evidence shows it: a terminal or CI log, and a Markdown table."""

from __future__ import annotations

import re

# C0 and C1 controls (newlines, ESC), line and paragraph separators and the bidirectional
# controls that reorder what a terminal draws (Trojan Source)
_CONTROLS = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)


def _escaped(pattern: re.Pattern[str], text: str) -> str:
    """``text`` with each character ``pattern`` matches written as its Python escape."""
    return pattern.sub(
        lambda m: m.group().encode("unicode_escape", "backslashreplace").decode("ascii"), text
    )


def one_line(text: str) -> str:
    """``text`` with every control character written as its escape (``\\n``, ``\\x1b``,
    ``\\u202e``): a record id cannot start a line of its own in a CI log (a forged
    ``verdict: PASS`` or a ``::workflow-command::``) or colour the terminal."""
    return _escaped(_CONTROLS, text)


# what XML 1.0 does not allow in a document at all, even as a character reference
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(text: str) -> str:
    """``text`` with each character XML 1.0 forbids written as its escape (``\\x1b``): an
    error message from a tracking server could otherwise make ``junit.xml`` unreadable."""
    return _escaped(_NOT_XML, text)


def markdown_cell(text: str) -> str:
    """``text`` on one line for a Markdown table cell: ``|`` would end the cell, ``<`` could
    open HTML (an image that a pull-request page would load)."""
    return one_line(text).replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")
