"""Text read in the order it is displayed (policy ``text.display_order``): a release that
writes a train record backwards between a right-to-left override and its end
(``U+202E … U+202C``), or its words in reverse order with right-to-left marks between
them, is displayed as the record itself, and must read so to the gate. Removing the
invisible formatting characters, as ``strip_invisible`` does, leaves such a text
reversed.

The Unicode Bidirectional Algorithm (UAX #9) lays out a paragraph in two parts: the
embedding level of every character (rules P2-I2: explicit embeddings, overrides and
isolates, then weak and neutral types and bracket pairs), which the ``python-bidi``
package computes (Rust's ``unicode-bidi``), and the reordering of a line (rules L1-L4),
done here on those levels: white space at the end of the line and before a segment
separator back at the paragraph's level (L1), every run at a level of at least k
reversed, from the highest level down to the lowest odd one (L2), combining marks kept
after their base (L3), and the characters of a right-to-left run that are drawn mirrored
(L4: ``(`` is drawn as ``)``) replaced by their mirror. A paragraph separator, a line
separator or a form feed ends a line; a renderer's own line breaks depend on its width,
which a text file does not have.

A paragraph whose formatting characters change nothing a reader sees is left as it is
(so a right-to-left text whose marks only place punctuation reads as the same text
without them). Any other is replaced by the text a reader reads in its display: the
display itself where it holds no right-to-left letter, else the display laid out again
at the paragraph's level, which gives a right-to-left text in its logical order. A
renderer takes a paragraph's direction from its first strong character or sets it (a
browser: left to right unless told): a paragraph whose first strong character is right
to left is read as each displays it, one line each where the readings differ. Invisible
characters of a strong direction (:data:`DIRECTING`) direct a layout as the marks do.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

import numpy as np

# The characters that only direct the layout: the marks, the embeddings and overrides
# with their end, and the isolates.
ALM, LRM, RLM = "\u061c", "\u200e", "\u200f"
LRE, RLE, PDF, LRO, RLO = "\u202a", "\u202b", "\u202c", "\u202d", "\u202e"
LRI, RLI, FSI, PDI = "\u2066", "\u2067", "\u2068", "\u2069"
BIDI_FORMATTING = ALM + LRM + RLM + LRE + RLE + PDF + LRO + RLO + LRI + RLI + FSI + PDI
# Characters strip_invisible removes, or reads as a space, whose class is strong (L, R,
# AL) or an Arabic number (AN): the Arabic number signs, tatweel, end of ayah, Syriac
# abbreviation mark, Arabic pound and piastre marks, Arabic superscript alef mark, Kaithi
# number signs, Egyptian hieroglyph format controls, the braille blank and the Hangul
# fillers (a test checks every one). Like the marks, they set the direction of what is
# around them: reviews hid a copy's words in reverse order between U+070F, and a Hebrew
# record's between braille blanks.
_INVISIBLE_DIRECTING = (
    "\u0600-\u0605\u0640\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160\u2800\u3164\uffa0"
    "\U000110bd\U000110cd\U00013430-\U0001343f"
)
_BLANKS = str.maketrans(dict.fromkeys("\u115f\u1160\u2800\u3164\uffa0", " "))
DIRECTING = f"[{BIDI_FORMATTING}{_INVISIBLE_DIRECTING}]"  # what directs a layout unseen
_DIRECTING = re.compile(DIRECTING)
# Where a line ends inside a paragraph (line separator, form feed): each line is laid out
# on its own (L1-L4), as renderers break lines there.
_LINE_ENDS = np.array([0x0C, 0x2028], dtype=np.uint32)
# Unicode's paragraph separators (bidirectional class B), after which every embedding,
# override and isolate ends (UAX #9, X8).
_PARAGRAPHS = re.compile("([\n\r\x1c\x1d\x1e\x85\u2029])")
# UAX #9's bidirectional classes, and as unicode-bidi prints them in a list (sorted)
CLASSES = sorted(
    "AL AN B BN CS EN ES ET FSI L LRE LRI LRO NSM ON PDF PDI R RLE RLI RLO S WS".split()  # noqa: SIM905
)
_CLASS_NAMES = np.array([f"{name}," for name in CLASSES])
_CODE_B, _CODE_S, _CODE_NSM, _CODE_BN = (CLASSES.index(name) for name in ("B", "S", "NSM", "BN"))
# Removed before reordering (X9): the embeddings, overrides and their end. Boundary
# neutrals (BN: zero-width characters, controls) are kept where they stand, as UAX #9
# section 5.2 allows, for strip_invisible to remove or keep.
_REMOVED = [CLASSES.index(name) for name in ("RLE", "LRE", "RLO", "LRO", "PDF")]
# Drawn as white space at the end of a line (L1), with the isolates' controls and the
# boundary neutrals (section 5.2).
_TRAILING = [CLASSES.index(name) for name in ("WS", "FSI", "LRI", "RLI", "PDI", "BN")]
_NOT_DRAWN = [CLASSES.index(name) for name in ("FSI", "LRI", "RLI", "PDI")]
_FORMATTING_POINTS = np.array([ord(char) for char in BIDI_FORMATTING], dtype=np.uint32)
# The blocks that hold every right-to-left letter and Arabic number (classes R, AL, AN;
# a test checks it): a text of no character of them and no formatting character is
# displayed as it is written.
_RIGHT_TO_LEFT = re.compile(
    "[\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufeff\U00010800-\U00010fff\U0001e800-\U0001efff]"
)
_PARAGRAPH_INFO = re.compile(r"ParagraphInfo \{\s*range: (\d+)\.\.(\d+),\s*level: Level\(\s*(\d+),")


@functools.cache
def _bidi() -> tuple[Callable[..., Any], tuple[np.ndarray, np.ndarray]]:
    """python-bidi's layout function and its table of the characters drawn mirrored in a
    right-to-left run (sorted code points, and the code point of each one's mirror),
    imported on first use.

    Raises:
        RuntimeError: ``python-bidi`` is not installed.
    """
    try:
        from bidi import get_display
        from bidi.mirror import MIRRORED
    except ImportError as exc:
        raise RuntimeError(
            "text.display_order needs the 'python-bidi' package (pip install "
            f"'python-bidi>=0.6,<0.7'): {exc}"
        ) from exc
    pairs = sorted((ord(char), ord(mirror)) for char, mirror in MIRRORED.items())
    mirrors = (
        np.array([char for char, _ in pairs], dtype=np.uint32),
        np.array([mirror for _, mirror in pairs], dtype=np.uint32),
    )
    return get_display, mirrors


def bidi_layout() -> None:
    """Import what :func:`displayed_text` needs, so that a missing package is an error
    before any text is read.

    Raises:
        RuntimeError: ``python-bidi`` is not installed.
    """
    _bidi()


def holds_bidi_formatting(text: str) -> bool:
    """Whether ``text`` holds a character of :data:`DIRECTING` (a formatting character
    of :data:`BIDI_FORMATTING`, or an invisible one of a strong direction)."""
    return _DIRECTING.search(text) is not None


def displayed_text(text: str) -> str:
    """``text`` as a reader of its display reads it (module docstring), paragraph by
    paragraph; a paragraph without a character of :data:`DIRECTING` is left as it is.

    Args:
        text: Any text.

    Returns:
        The text with each paragraph whose directing characters change its display
        replaced by what the display reads, without them (a paragraph displayed two ways,
        by its first strong character's direction and left to right, by both readings,
        one line each); the paragraph separators as they were.

    Raises:
        RuntimeError: ``python-bidi`` is not installed, or answered in a form this module
            does not read.
    """
    if not holds_bidi_formatting(text):
        return text
    # paragraphs at even places, separators at odd ones; a layout keeps both in place
    written = _PARAGRAPHS.split(text)
    # each paragraph at its first strong character's direction, and that direction
    shown_first, levels = _layout(text)
    firsts = {
        index: levels[index // 2] % 2
        for index in range(0, len(written), 2)
        if _DIRECTING.search(written[index])
    }
    right_to_left = 1 in firsts.values()
    shown = {1: _PARAGRAPHS.split(_without_directing(shown_first))}
    shown[0] = (
        shown[1]
        if not right_to_left
        else _PARAGRAPHS.split(_without_directing(display_layout(text, base=0)))
    )
    plain_text = _without_directing(text)
    plain_shown = {
        0: _PARAGRAPHS.split(
            display_layout(plain_text, base=0) if _RIGHT_TO_LEFT.search(plain_text) else plain_text
        )
    }
    if right_to_left:
        plain_shown[1] = _PARAGRAPHS.split(display_layout(plain_text, base=1))
    again: dict[int, list[str]] = {}  # the displays laid out again, made when needed
    for index, first in firsts.items():
        paragraph = written[index]
        readings: dict[str, str] = {}  # by what they read as once stripped
        # as a renderer that takes the direction from the first strong character shows
        # it, and as one that sets left to right (a browser, unless told) shows it
        for base in dict.fromkeys((first, 0)):
            if shown[base][index] == plain_shown[base][index]:
                reading = paragraph
            elif not _RIGHT_TO_LEFT.search(shown[base][index]):
                reading = shown[base][index]
            else:
                if base not in again:
                    again[base] = _PARAGRAPHS.split(display_layout("".join(shown[base]), base=base))
                reading = again[base][index]
            readings.setdefault(_without_directing(reading), reading)
        written[index] = "\n".join(readings.values())
    return "".join(written)


def _without_directing(text: str) -> str:
    """``text`` without the characters that direct a layout unseen, its blank lookalikes
    read as spaces (as ``strip_invisible`` reads them)."""
    return _DIRECTING.sub("", text.translate(_BLANKS))


def display_layout(text: str, *, base: int | None = None) -> str:
    """The characters of ``text`` in the order they are displayed, paragraph by paragraph
    and line by line (left to right), without the characters that only direct the
    layout, those of a right-to-left run that are drawn mirrored replaced by their mirror
    (UAX #9, L1-L4, on python-bidi's embedding levels). Paragraph and line separators stay
    where they are.

    Args:
        text: Any text.
        base: The paragraphs' level, 0 (left to right) or 1 (right to left); ``None``
            takes each paragraph's from its first strong character (P2-P3).

    Raises:
        RuntimeError: ``python-bidi`` is not installed or answered in a form this module
            does not read.
    """
    return _layout(text, base=base)[0]


def _layout(text: str, *, base: int | None = None) -> tuple[str, list[int]]:
    """:func:`display_layout`'s text, and the level of each paragraph, in the order of
    ``_PARAGRAPHS.split(text)``'s paragraphs (0 for an empty one)."""
    pieces = _PARAGRAPHS.split(text)[::2]
    if not text:
        return text, [0] * len(pieces)
    if base not in (None, 0, 1):
        raise ValueError(f"base must be None, 0 or 1, got {base!r}")
    get_display, (mirror_of, mirror) = _bidi()
    direction = None if base is None else "LR"[base]
    answer = get_display(text, base_dir=direction, debug=True)
    codes, levels, paragraph = _resolved_levels(answer, text)
    # the first character of each paragraph (separators sit between them)
    starts = np.cumsum([0] + [len(piece) + 1 for piece in pieces[:-1]])
    paragraph_levels = [
        int(paragraph[start]) if piece else 0 for start, piece in zip(starts, pieces, strict=True)
    ]
    points = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    kept = ~np.isin(codes, _REMOVED)
    points, codes, levels, paragraph = points[kept], codes[kept], levels[kept], paragraph[kept]
    if len(points) == 0:
        return "", paragraph_levels
    _reset_line_end_levels(codes, levels, paragraph, np.isin(points, _LINE_ENDS))
    order = _marks_after_base(_visual_order(levels), codes)
    shown = points[order]
    drawn = ~np.isin(codes[order], _NOT_DRAWN) & ~np.isin(shown, _FORMATTING_POINTS)
    mirror_place = np.searchsorted(mirror_of, shown).clip(max=len(mirror_of) - 1)
    flipped = (levels[order] % 2 == 1) & (mirror_of[mirror_place] == shown)
    shown = np.where(flipped, mirror[mirror_place], shown)
    return shown[drawn].astype(np.uint32).tobytes().decode("utf-32-le"), paragraph_levels


def _resolved_levels(answer: Any, text: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The original bidirectional class (its place in :data:`CLASSES`) and the resolved
    embedding level of each character of ``text``, and its paragraph's level, read from
    python-bidi's ``debug=True`` answer (``unicode-bidi``'s ``BidiInfo``: a class and a
    level per UTF-8 byte, of which a character's first byte is taken, and each
    paragraph's byte range and level).

    Raises:
        RuntimeError: The answer is not in that form.
    """
    answer = str(answer)
    # the text itself is printed escaped on one line, so no line of it starts so
    classes_at = answer.find("\n    original_classes: [\n")
    levels_at = answer.find("\n    levels: [\n")
    paragraphs_at = answer.find("\n    paragraphs: [\n")
    if not 0 < classes_at < levels_at < paragraphs_at:
        raise RuntimeError(
            "python-bidi's layout answered in a form the gate does not read (expected "
            "unicode-bidi's BidiInfo with original_classes, levels and paragraphs); "
            "install python-bidi>=0.6,<0.7"
        )
    encoded = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    # "original_classes: [ L, WS, ... ]," and "levels: [ Level( 0, ), ... ],"
    names = np.array(answer[classes_at:levels_at].split()[2:-1])
    codes = np.searchsorted(_CLASS_NAMES, names).clip(max=len(_CLASS_NAMES) - 1)
    known = _CLASS_NAMES[codes] == names
    values = "".join(answer[levels_at:paragraphs_at].split()[3::3])  # "0,0,1,"
    levels = np.fromstring(values, dtype=np.int16, sep=",") if values else np.zeros(0, np.int16)
    ranges = _PARAGRAPH_INFO.findall(answer, paragraphs_at)
    paragraph = np.full(len(encoded), -1, dtype=np.int16)
    for first, end, level in ranges:
        paragraph[int(first) : int(end)] = int(level)
    if len(codes) != len(encoded) or len(levels) != len(encoded) or not known.all():
        raise RuntimeError(
            f"python-bidi's layout of a text of {len(encoded)} bytes gave {len(codes)} "
            f"classes ({int((~known).sum())} unknown) and {len(levels)} levels"
        )
    if (paragraph < 0).any():
        raise RuntimeError("python-bidi's layout left bytes of the text in no paragraph")
    first_bytes = np.flatnonzero((encoded & 0xC0) != 0x80)
    return (
        codes.astype(np.int8)[first_bytes],
        levels[first_bytes],
        paragraph[first_bytes],
    )


def _reset_line_end_levels(
    codes: np.ndarray, levels: np.ndarray, paragraph: np.ndarray, line_ends: np.ndarray
) -> None:
    """UAX #9 L1 on each line, in place: segment separators, and white space and isolate
    controls before one or at the end of the line, take the paragraph's level; a
    paragraph separator or a character that ends a line (``line_ends``) takes level 0,
    so that no reversal (L2) crosses it."""
    separator = codes == _CODE_S
    ends_line = (codes == _CODE_B) | line_ends
    trailing = np.isin(codes, _TRAILING) & ~line_ends
    ends = np.append(separator | ends_line, True)[_next_outside(trailing)]
    reset = separator | (trailing & ends)
    levels[reset] = paragraph[reset]
    levels[ends_line] = 0


def _next_outside(inside: np.ndarray) -> np.ndarray:
    """For each place, the first place at or after it where ``inside`` is false
    (``len(inside)`` where there is none)."""
    places = np.where(inside, len(inside), np.arange(len(inside)))
    return np.minimum.accumulate(places[::-1])[::-1]


def _visual_order(levels: np.ndarray) -> np.ndarray:
    """UAX #9 L2: the logical places in display order, every maximal run at a level of at
    least k reversed, from the highest level down to 1. Below a line's lowest odd level
    this reverses the whole line an even number of times, which leaves it as it was; a
    paragraph separator, at level 0, ends every run."""
    order = np.arange(len(levels))
    at = levels.copy()  # the level at each display place
    places = np.arange(len(at))
    for level in range(int(at.max()), 0, -1):
        inside = at >= level
        edges = np.diff(np.concatenate(([0], inside.astype(np.int8), [0])))
        starts = np.flatnonzero(edges == 1)
        stops = np.flatnonzero(edges == -1)  # one past each run's end
        run = np.cumsum(edges[:-1] == 1) - 1
        target = places.copy()
        target[inside] = starts[run[inside]] + stops[run[inside]] - 1 - places[inside]
        order[target] = order.copy()
        at[target] = at.copy()
    return order


def _marks_after_base(order: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """UAX #9 L3: each combining mark (class NSM) after its base character, in its
    logical order, where a reversed run had put it before."""
    marks = codes == _CODE_NSM
    if not marks.any():
        return order
    places = np.arange(len(codes))
    # a mark's base: the last character before it that is neither a mark nor a boundary
    # neutral (a zero-width joiner between them stays in the cluster, as W1 skips it)
    boundary = codes == _CODE_BN
    # a boundary neutral is attached when the next character that is not one is a mark
    attached = marks | (boundary & np.append(marks, False)[_next_outside(boundary)])
    base = np.maximum.accumulate(np.where(attached, 0, places))
    shown_at = np.empty_like(order)
    shown_at[order] = np.arange(len(order))
    return order[np.lexsort((order, shown_at[base[order]]))]
