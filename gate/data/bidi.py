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
(L4: ``(`` is drawn as ``)``) replaced by their mirror. Each paragraph is one line: a
renderer's line breaks depend on its width, which a text file does not have.

A paragraph whose formatting characters change nothing a reader sees is left as it is
(so a right-to-left text whose marks only place punctuation reads as the same text
without them). Any other is replaced by the text a reader reads in its display: the
displayed characters read in the algorithm's order again, without formatting characters,
so that a left-to-right text reads left to right and a right-to-left one in its logical
order.
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
_FORMATTING_CLASS = re.compile(f"[{BIDI_FORMATTING}]")
# Unicode's paragraph separators (bidirectional class B), after which every embedding,
# override and isolate ends (UAX #9, X8).
_PARAGRAPHS = re.compile("([\n\r\x1c\x1d\x1e\x85\u2029])")
# Removed before reordering (X9): the embeddings, overrides and their end. Boundary
# neutrals (BN: zero-width characters, controls) are kept where they stand, as UAX #9
# section 5.2 allows, for strip_invisible to remove or keep.
_REMOVED = frozenset({"RLE", "LRE", "RLO", "LRO", "PDF"})
# Drawn as white space at the end of a line (L1), with the isolates' controls and the
# boundary neutrals (section 5.2).
_TRAILING = frozenset({"WS", "FSI", "LRI", "RLI", "PDI", "BN"})
_NOT_DRAWN = frozenset({"FSI", "LRI", "RLI", "PDI"})
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
    return get_display, (
        np.array([char for char, _ in pairs], dtype=np.uint32),
        np.array([mirror for _, mirror in pairs], dtype=np.uint32),
    )


def bidi_layout() -> None:
    """Import what :func:`displayed_text` needs, so that a missing package is an error
    before any text is read.

    Raises:
        RuntimeError: ``python-bidi`` is not installed.
    """
    _bidi()


def holds_bidi_formatting(text: str) -> bool:
    """Whether ``text`` holds a character of :data:`BIDI_FORMATTING`."""
    return _FORMATTING_CLASS.search(text) is not None


def displayed_text(text: str) -> str:
    """``text`` as a reader of its display reads it (module docstring), paragraph by
    paragraph; a paragraph without formatting characters is left as it is.

    Args:
        text: Any text.

    Returns:
        The text with each paragraph whose formatting characters change its display
        replaced by what the display reads, without formatting characters; the paragraph
        separators as they were.

    Raises:
        RuntimeError: ``python-bidi`` is not installed, or answered in a form this module
            does not read.
    """
    if not holds_bidi_formatting(text):
        return text
    pieces = _PARAGRAPHS.split(text)  # paragraphs at even places, separators at odd ones
    for index in range(0, len(pieces), 2):
        if holds_bidi_formatting(pieces[index]):
            pieces[index] = _read_paragraph(pieces[index])
    return "".join(pieces)


def _read_paragraph(paragraph: str) -> str:
    shown = line_display(paragraph)
    plain = _FORMATTING_CLASS.sub("", paragraph)
    if shown == (line_display(plain) if _RIGHT_TO_LEFT.search(plain) else plain):
        return paragraph
    return line_display(shown) if _RIGHT_TO_LEFT.search(shown) else shown


def line_display(line: str) -> str:
    """The characters of ``line`` (one paragraph) in the order they are displayed, left
    to right, without the characters that only direct the layout, those of a
    right-to-left run that are drawn mirrored replaced by their mirror (UAX #9, L1-L4 on
    python-bidi's embedding levels; the paragraph's level from its first strong
    character, P2-P3).

    Raises:
        RuntimeError: ``python-bidi`` is not installed or answered in a form this module
            does not read; ``line`` holds a paragraph separator.
    """
    if not line:
        return line
    get_display, mirrored = _bidi()
    classes, levels, paragraph_level = _resolved_levels(get_display(line, debug=True), line)
    points = np.frombuffer(line.encode("utf-32-le"), dtype=np.uint32)
    kept = ~np.isin(classes, list(_REMOVED))
    points, classes, levels = points[kept], classes[kept], levels[kept].copy()
    if len(points) == 0:
        return ""
    _reset_line_end_levels(classes, levels, paragraph_level)
    order = _visual_order(levels)
    order = _marks_after_base(order, classes)
    shown = points[order]
    drawn = ~np.isin(classes[order], list(_NOT_DRAWN))
    drawn &= ~np.isin(shown, [ord(c) for c in BIDI_FORMATTING])
    mirror_of, mirror = mirrored
    mirror_place = np.searchsorted(mirror_of, shown).clip(max=len(mirror_of) - 1)
    flipped = (levels[order] % 2 == 1) & (mirror_of[mirror_place] == shown)
    shown = np.where(flipped, mirror[mirror_place], shown)
    text = shown[drawn].astype(np.uint32).tobytes().decode("utf-32-le")
    return text


def _resolved_levels(answer: Any, line: str) -> tuple[np.ndarray, np.ndarray, int]:
    """The original bidirectional class and the resolved embedding level of each
    character of ``line``, and the paragraph's level, read from python-bidi's
    ``debug=True`` answer (``unicode-bidi``'s ``BidiInfo``: a class and a level per UTF-8
    byte, of which a character's first byte is taken).

    Raises:
        RuntimeError: The answer is not in that form, or ``line`` is more than one
            paragraph.
    """
    text = str(answer)
    # the text itself is printed escaped on one line, so no line of it starts so
    classes_at = text.find("\n    original_classes: [\n")
    levels_at = text.find("\n    levels: [\n")
    paragraphs_at = text.find("\n    paragraphs: [\n")
    if not 0 < classes_at < levels_at < paragraphs_at:
        raise RuntimeError(
            "python-bidi's layout answered in a form the gate does not read (expected "
            "unicode-bidi's BidiInfo with original_classes, levels and paragraphs); "
            "install python-bidi>=0.6,<0.7"
        )
    encoded = np.frombuffer(line.encode("utf-8"), dtype=np.uint8)
    # "original_classes: [ L, WS, ..." and "levels: [ Level( 0, ), ..." split at blanks
    classes = [name.rstrip(",") for name in text[classes_at:levels_at].split()[2:-1]]
    levels = [value.rstrip(",") for value in text[levels_at:paragraphs_at].split()[3::3]]
    paragraphs = _PARAGRAPH_INFO.findall(text, paragraphs_at)
    if len(classes) != len(encoded) or len(levels) != len(encoded) or len(paragraphs) != 1:
        raise RuntimeError(
            f"python-bidi's layout of a line of {len(encoded)} bytes gave {len(classes)} "
            f"classes, {len(levels)} levels and {len(paragraphs)} paragraphs (expected "
            f"{len(encoded)}, {len(encoded)} and 1)"
        )
    if not all(value.isdigit() for value in levels):
        raise RuntimeError(f"python-bidi's layout gave levels that are not numbers: {levels}")
    first_bytes = np.flatnonzero((encoded & 0xC0) != 0x80)
    return (
        np.asarray(classes)[first_bytes],
        np.asarray(levels, dtype=np.int16)[first_bytes],
        int(paragraphs[0][2]),
    )


def _reset_line_end_levels(classes: np.ndarray, levels: np.ndarray, paragraph: int) -> None:
    """UAX #9 L1 on one line, in place: segment separators, and white space and isolate
    controls before one or at the end of the line, take the paragraph's level."""
    separator = classes == "S"
    trailing = np.isin(classes, list(_TRAILING))
    places = np.arange(len(classes))
    # the place of the first character at or after each that is not trailing white space
    next_other = np.where(trailing, len(classes), places)
    next_other = np.minimum.accumulate(next_other[::-1])[::-1]
    ends = np.append(separator, True)[next_other]
    levels[separator | (trailing & ends)] = paragraph


def _visual_order(levels: np.ndarray) -> np.ndarray:
    """UAX #9 L2: the logical places in display order, every maximal run at a level of at
    least k reversed, from the highest level down to the lowest odd one."""
    order = np.arange(len(levels))
    at = levels.copy()  # the level at each display place
    lowest_odd = int(at.min()) | 1
    places = np.arange(len(at))
    for level in range(int(at.max()), lowest_odd - 1, -1):
        inside = at >= level
        if not inside.any():
            continue
        edges = np.diff(np.concatenate(([0], inside.astype(np.int8), [0])))
        starts = np.flatnonzero(edges == 1)
        stops = np.flatnonzero(edges == -1)  # one past each run's end
        run = np.cumsum(edges[:-1] == 1) - 1
        target = places.copy()
        target[inside] = starts[run[inside]] + stops[run[inside]] - 1 - places[inside]
        order[target] = order.copy()
        at[target] = at.copy()
    return order


def _marks_after_base(order: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """UAX #9 L3: each combining mark (class NSM) after its base character, in its
    logical order, where a reversed run had put it before."""
    marks = classes == "NSM"
    if not marks.any():
        return order
    places = np.arange(len(classes))
    base = np.maximum.accumulate(np.where(marks, 0, places))  # a mark's base: the last non-mark
    shown_at = np.empty_like(order)
    shown_at[order] = np.arange(len(order))
    return order[np.lexsort((order, shown_at[base[order]]))]
