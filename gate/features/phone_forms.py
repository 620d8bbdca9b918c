"""How a reader reads a phone number that phonenumbers' matcher does not: one broken by
a line break or a tab (``775-568-`` at the end of a line, ``2052`` at the start of the
next) and one whose digit groups are separated by a character the matcher does not
allow between them (``775·568·2052``, ``775_568_2052``, ``775 | 568 | 2052``). Each
reading replaces characters one for one, so that a number's offsets in the reading are
its offsets in the text. Used by the phone recognizer
(:class:`gate.features.pii_windows.WindowedPhoneRecognizer`) and by the normalisation
of a phone number's value (:func:`gate.features.pii.normalise`); no Presidio import."""

from __future__ import annotations

import re

# a character phone numbers are written with, on both sides of a break or separator
_NUMBER_CHARACTER = "[\\d+().\\-/]"

# Line breaks and tabs, which phonenumbers' matcher does not allow inside a number (its
# blanks are the space, the no-break space and the ideographic space).
_BREAKS_AND_TABS = "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f\x85\u2028\u2029"
BREAK_IN_NUMBER = re.compile(
    f"(?<={_NUMBER_CHARACTER})[ \u00a0]*[{_BREAKS_AND_TABS}][{_BREAKS_AND_TABS} \u00a0]*"
    f"(?={_NUMBER_CHARACTER})"
)
_AS_SPACE = {ord(c): " " for c in _BREAKS_AND_TABS}

# Characters a reader takes for the separator of a number's digit groups and the matcher
# does not allow there: vertical bars, and the underscore, the backslash, tildes (read as
# written first: phonenumbers takes "775-568-2052~1" for the number and an extension),
# middle dots and bullets. Left out: the comma, the semicolon and the apostrophe, which
# group the digits of amounts ("1,234,567,890" is no phone number to a reader), the colon
# (times, ports, "key:value" data: 648 of 666 numbers this reading added in 46 M
# characters of documentation and data files) and the asterisk (products: "32 * 1024 *
# 1024"). An allow-list: any other symbol between the groups is not read (README).
_BARS = "|\u00a6\u2502\u2503\u2758\u23d0"
_OTHER_SEPARATORS = (
    "_\\~\uff5e"
    "\u00b7\u0387\u2022\u2219\u22c5\u2027\u2e31\u2e30\ua78f\u1427\u30fb\uff65\u16eb"
    "\u2981\u25cf\u2023\u25e6\u2218\u25aa\u25a0\u25cb"
)
UNREAD_SEPARATORS = _BARS + _OTHER_SEPARATORS
_SEPARATORS = re.escape(UNREAD_SEPARATORS)
_BEFORE_A_BREAK = re.escape(_OTHER_SEPARATORS)
# Blanks may stand beside them, and a line break or tab after one that is not a bar (then
# read as a space: "775·568·" ends a line); not before them: "12\n| 34", "12 |\n| 34"
# and "12 |\n" are cells of tables, and reading each row of one so read the row again
# (15x slower, and a number of every row).
SEPARATOR_IN_NUMBER = re.compile(
    f"(?<={_NUMBER_CHARACTER})[ \u00a0]*[{_SEPARATORS}][{_SEPARATORS} \u00a0]*"
    f"(?:(?:(?<=[{_BEFORE_A_BREAK}])|(?<=[{_BEFORE_A_BREAK}][ \u00a0]))"
    f"[{_BREAKS_AND_TABS}][{_BREAKS_AND_TABS} \u00a0]*)?(?={_NUMBER_CHARACTER})"
)
_AS_HYPHEN = {ord(c): "-" for c in UNREAD_SEPARATORS}


def breaks_in_numbers_as_spaces(text: str) -> str:
    """``text`` with the line breaks and tabs between two characters of a phone number
    (digits, ``+ ( ) - . /``) read as spaces, one for one (offsets hold)."""
    return BREAK_IN_NUMBER.sub(lambda m: m.group().translate(_AS_SPACE), text)


def separators_in_numbers_as_hyphens(text: str) -> str:
    """``text`` with every :data:`UNREAD_SEPARATORS` character between two characters of a
    phone number read as a hyphen, one for one (offsets hold): ``775·568·2052`` reads
    ``775-568-2052``."""
    return SEPARATOR_IN_NUMBER.sub(lambda m: m.group().translate(_AS_HYPHEN), text)
