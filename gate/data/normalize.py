"""Text normalisation before any feature is taken: HTML read as the text it shows (if
asked), invisible characters removed, confusable characters folded to their ASCII
lookalikes, the policy's Unicode normal form and case folding (README, policy key
`text:`); and which texts hold anything visible.
"""

from __future__ import annotations

import functools
import re
import unicodedata

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from gate.data.bidi import DIRECTING, bidi_layout, displayed_text
from gate.data.confusables import ascii_lookalikes, code_point_ranges, fold_confusables
from gate.data.deleted_spaces import SourceWords, spaces_restored
from gate.data.markup import html_parser, read_html_texts
from gate.policy.models import TextPolicy

# Invisible beyond Unicode's format characters (category Cf): the rest of Unicode's
# Default_Ignorable_Code_Point set (DerivedCoreProperties.txt), which renderers draw as
# nothing, unassigned code points of it included: variation selectors (Mongolian ones
# too), the combining grapheme joiner, Khmer fillers, and the reserved U+2065,
# U+FFF0-U+FFF8 and plane 14; and the control characters (category Cc) that are not
# white space, which terminals and most renderers print as nothing (NUL, U+0001 ...,
# DEL, the C1 controls but NEL). A review hid verbatim copies behind U+180B, one in every
# word (each token then differs from train's), and behind U+0001 after every word's
# first letter. Also the Arabic tatweel, which only stretches the letters it joins (the
# review appended it to words to split them under the word tokenizer).
_ALSO_INVISIBLE = (
    (0x0000, 0x0008),
    (0x000E, 0x001B),
    (0x007F, 0x0084),
    (0x0086, 0x009F),
    (0x034F, 0x034F),
    (0x0640, 0x0640),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x2065, 0x2065),
    (0xFE00, 0xFE0F),
    (0xFFF0, 0xFFF8),
    (0xE0000, 0xE0FFF),
)
_TATWEEL = "\u0640"
# the characters whose NFKD holds a tatweel (every code point checked in tests)
_TATWEEL_FORMS = re.compile("[\ufe71\ufe77\ufe79\ufe7b\ufe7d\ufe7f\ufcf2-\ufcf4]")
# ASCII among them: the only invisible characters an ASCII text can hold
_ASCII_INVISIBLE = "[\\x00-\\x08\\x0E-\\x1B\\x7F]"
# Drawn as a blank of a space's width but not white space (a whole record would be one
# whitespace token): read as a space. The braille blank, and the Hangul fillers, which are
# default-ignorable but which text shapers (HarfBuzz: browsers, Android) draw as a
# spacing blank: a review joined whole records into one token with U+3164 for spaces.
_BLANK_LOOKALIKES = "\u2800\u115f\u1160\u3164\uffa0"


@functools.cache
def invisible_ranges() -> tuple[tuple[int, int], ...]:
    """Every invisible code point as sorted, disjoint ``(first, last)`` ranges: all of
    category Cf (zero-width spaces and joiners, bidirectional marks, soft hyphen, tag
    characters, ...) in this Python's Unicode database, and ``_ALSO_INVISIBLE``."""
    planes = (range(0x20000), range(0xE0000, 0xE1000))  # where Unicode puts every Cf
    points = [c for plane in planes for c in plane if unicodedata.category(chr(c)) == "Cf"]
    points += [c for lo, hi in _ALSO_INVISIBLE for c in range(lo, hi + 1)]
    return code_point_ranges(points)


@functools.cache
def invisible_pattern() -> str:
    """A character class of :func:`invisible_ranges` in RE2's syntax (pyarrow's regular
    expressions)."""
    return "[" + "".join(f"\\x{{{lo:X}}}-\\x{{{hi:X}}}" for lo, hi in invisible_ranges()) + "]"


_NORMALIZE_ROWS = 1 << 16  # texts normalised at a time (Python strings of one slice alive)

# A character that is no letter, digit, mark or white space, followed by a letter or digit:
# it joins what follows to what precedes (``John_Smith``, ``who.lives``). The other readings
# of a release (:func:`joined_words_readings`) read the last such character before a letter
# or digit (``_JOINER``), or the whole run of them (``_JOINER_RUN``), as a space.
_NOT_WORD = r"[^\p{L}\p{N}\p{M}\p{Z}\s]"
_JOINER = f"({_NOT_WORD})\\p{{M}}*([\\p{{L}}\\p{{N}}])"  # marks may follow a joiner
_JOINER_RUN = f"(?:{_NOT_WORD}\\p{{M}}*)+([\\p{{L}}\\p{{N}}])"
# Invisible characters stand as this private-use character (a joiner) until the joiners
# are read: the first reading removes them, so they join words too (a zero-width space
# for a space), also where they follow another joiner or are marks (variation selectors).
_INVISIBLE_JOINER = "\ue000"


def normalize_text(texts: pd.Series, policy: TextPolicy) -> pd.Series:
    """``texts`` (strings) read as the text their HTML shows under ``markup: html``
    (:mod:`gate.data.markup`: a character reference may stand for any character the
    next steps remove or fold), in the order they are displayed where bidirectional
    formatting characters change it (``display_order``, :mod:`gate.data.bidi`: removing
    them leaves a reversed text reversed), without invisible characters, then with confusable
    characters folded to their ASCII lookalikes (:mod:`gate.data.confusables`) in the
    policy's Unicode normal form, then case-folded if asked. Invisible characters go
    before the fold: one between a letter and its combining accent would otherwise keep
    the two from composing.

    A text of ASCII characters only is left as it is by the first three steps unless it
    holds a control character to strip (no other invisible or folded character is ASCII,
    and every ASCII character is its own normal form), so they run on the other texts
    only, found by pyarrow's ``string_is_ascii`` and one regular-expression match
    (in slices of :data:`_NORMALIZE_ROWS` texts): the invisible characters are removed
    by pyarrow's regular-expression kernel (RE2) and the normal form is Python's
    ``unicodedata`` (pyarrow 25's ``utf8_normalize`` does not compose: its NFC of "À" is
    "A" followed by U+0300).
    """
    texts = _normalized(texts, policy, invisible_as_joiners=False)
    return texts.str.casefold() if policy.casefold else texts


def normalize_shown_text(texts: pd.Series, policy: TextPolicy) -> pd.Series:
    """:func:`normalize_text` of what each text's HTML shows, whatever ``policy.markup``
    says (:func:`gate.data.markup.html_shown_text`: without the link addresses and other
    hidden content ``markup: html`` reads after it), as a pipeline that extracts the text
    of HTML reads it."""
    html_parser()
    shown = _html_read(texts, shown_only=True)
    return normalize_text(shown, policy.model_copy(update={"markup": "none"}))


def may_hold_markup(texts: pd.Series) -> np.ndarray:
    """Whether each text may hold HTML markup (a ``<`` or an ``&``)."""
    return texts.str.contains("[<&]", regex=True).to_numpy(dtype=bool, na_value=False)


def _normalized(texts: pd.Series, policy: TextPolicy, *, invisible_as_joiners: bool) -> pd.Series:
    """:func:`normalize_text` but the case fold; with ``invisible_as_joiners``, invisible
    characters stand as :data:`_INVISIBLE_JOINER` (once the markup and display steps have
    run) instead of being removed, for :func:`joined_words_readings`."""
    if policy.fold_confusables:
        ascii_lookalikes()  # a missing list is an error before any text, not at the first
    if policy.markup == "html":
        html_parser()  # so is a missing parser
        texts = _html_read(texts)
    if policy.display_order:
        bidi_layout()
        texts = _displayed(texts)
    if invisible_as_joiners:
        texts = _replaced(texts, invisible_pattern(), _INVISIBLE_JOINER)
    unicode_steps = policy.strip_invisible or policy.fold_confusables
    if (unicode_steps or policy.normalization != "none") and len(texts):
        values = pa.array(texts.array)
        pieces = [  # slices share the column's buffers
            chunk.slice(start, _NORMALIZE_ROWS)
            for chunk in (values.chunks if isinstance(values, pa.ChunkedArray) else [values])
            for start in range(0, len(chunk), _NORMALIZE_ROWS)
        ]
        normalized = [_normalized_chunk(piece, policy) for piece in pieces]
        if any(new is not old for new, old in zip(normalized, pieces, strict=True)):
            texts = pd.Series(
                pd.array(pa.chunked_array(normalized, type=values.type), dtype=texts.dtype),
                index=texts.index,
                name=texts.name,
            )
    return texts


def _replaced(texts: pd.Series, pattern: str, replacement: str) -> pd.Series:
    """``texts`` with every match of ``pattern`` (RE2) replaced."""
    if not len(texts):
        return texts
    values = pc.replace_substring_regex(
        pa.array(texts.array), pattern=pattern, replacement=replacement
    )
    return pd.Series(pd.array(values, dtype=texts.dtype), index=texts.index, name=texts.name)


def joined_words_readings(
    texts: pd.Series,
    read: pd.Series,
    policy: TextPolicy,
    *,
    source_words: SourceWords | None = None,
) -> pd.Series:
    """The other readings of release ``texts`` (as written; ``read`` is their
    :func:`normalize_text` under ``policy``): each text read again with what joins a
    letter or digit to what precedes it read as a space, the last joiner of a run
    (``Smith,_who`` reads ``Smith, who``) and the whole run (``alpha__bravo`` reads
    ``alpha bravo``). Both are read from one normalisation of the texts in which
    invisible characters stand as joiners (:func:`_normalized`: after the fold and the
    normal form, ``＿`` is ``_`` and ``ⓑ`` a letter). With ``source_words``, each of the
    three (the first reading, the last joiner's, the whole run's) is read once more with
    deleted spaces restored (:func:`gate.data.deleted_spaces.spaces_restored`:
    ``thepatientwas`` reads ``the patient was``, ``the__patientwas`` ``the patient was``),
    and the first reading of a text holding a combining mark once more with every mark
    deleted before. Each reading that differs from the one it was made from is kept,
    indexed by its text's position. Where the confusables fold reads a text's capitals
    other than its small letters, the text is also read case-folded first, and all of the
    above made again from that reading (:func:`_case_folded_first`); a position is read
    at most fifteen times.

    A copy whose spaces were replaced by punctuation, symbols or invisible characters
    (which the first reading removes), one or several, reads as the copy again; so does
    one whose spaces were deleted, where the source's words explain the run, and one in
    the capitals of another script.
    """
    held = pc.match_substring_regex(pa.array(texts.array), f"{_NOT_WORD}|{invisible_pattern()}")
    positions = np.flatnonzero(held.to_numpy(zero_copy_only=False))
    readings: list[pd.Series] = []
    none = pd.Series([], dtype=read.dtype, index=pd.Index([], dtype=np.int64))
    last_kept = runs_kept = none
    if positions.size:
        some = texts.iloc[positions].reset_index(drop=True)
        first = read.iloc[positions].reset_index(drop=True)
        joined = _normalized(some, policy, invisible_as_joiners=True)

        def spaced(pattern: str, replacement: str) -> pd.Series:
            read = _replaced(_replaced(joined, pattern, replacement), _INVISIBLE_JOINER, "")
            return read.str.casefold() if policy.casefold else read

        last, runs = spaced(_JOINER, r" \2"), spaced(_JOINER_RUN, r" \1")
        keep_last = (last != first).to_numpy(dtype=bool)
        keep_runs = ((runs != first) & (runs != last)).to_numpy(dtype=bool)
        last_kept = _at_rows(last[keep_last], positions, read.dtype)
        runs_kept = _at_rows(runs[keep_runs], positions, read.dtype)
        readings += [last_kept, runs_kept]
    if source_words is not None:
        marked = pc.match_substring_regex(pa.array(read.array), r"\p{M}")
        with_marks = np.flatnonzero(marked.to_numpy(zero_copy_only=False))
        made_from = (  # a reading, the rows of its texts, whether its marks are deleted first
            (read, np.arange(len(read)), False),
            (last_kept, last_kept.index.to_numpy(), False),
            (runs_kept, runs_kept.index.to_numpy(), False),
            (read.iloc[with_marks], with_marks, True),
        )
        for reading, rows, delete_marks in made_from:
            restored = spaces_restored(
                reading.reset_index(drop=True), source_words, delete_marks=delete_marks
            )
            readings.append(_at_rows(restored, rows, read.dtype))
    if policy.fold_confusables and not policy.casefold:
        readings.append(_case_folded_first(texts, read, policy, source_words=source_words))
    if not readings:
        return none
    return pd.Series(
        np.concatenate([r.to_numpy() for r in readings]),
        index=np.concatenate([r.index.to_numpy(dtype=np.int64) for r in readings]),
        dtype=read.dtype,
    )


def _case_folded_first(
    texts: pd.Series, read: pd.Series, policy: TextPolicy, *, source_words: SourceWords | None
) -> pd.Series:
    """Release ``texts`` read case-folded before the confusables fold (as under
    ``casefold: true``), where that differs from their first reading ``read`` case-folded,
    and the other readings of that reading (:func:`joined_words_readings`), indexed by
    the texts' positions. The fold reads a word only when each of its letters passes for
    an ASCII one, and another script's capitals do more often than its small letters
    (Greek ``ΚΑΙ`` reads ``KAI``, ``και`` stays): a copy in capitals then matched no
    n-gram of its source even under a lower-casing tokenizer (a review)."""
    values = pa.array(texts.array)
    other = pc.fill_null(pc.invert(pc.string_is_ascii(values)), False)
    rows = np.flatnonzero(other.to_numpy(zero_copy_only=False))
    cased = pc.match_substring_regex(  # a letter with a case beyond ASCII's
        pc.replace_substring_regex(values.take(pa.array(rows)), "[A-Za-z]+", ""),
        r"[\p{Lu}\p{Ll}\p{Lt}]",
    )
    rows = rows[cased.to_numpy(zero_copy_only=False)]
    none = pd.Series([], dtype=read.dtype, index=pd.Index([], dtype=np.int64))
    if not rows.size:
        return none
    folding = policy.model_copy(update={"casefold": True})
    some = texts.iloc[rows].reset_index(drop=True)
    lowered = normalize_text(some, folding)
    differs = (lowered != read.iloc[rows].reset_index(drop=True).str.casefold()).to_numpy(bool)
    if not differs.any():
        return none
    rows, some = rows[differs], some[differs].reset_index(drop=True)
    lowered = lowered[differs].reset_index(drop=True)
    more = joined_words_readings(some, lowered, folding, source_words=source_words)
    return _at_rows(pd.concat([lowered, more]), rows, read.dtype)


def _at_rows(readings: pd.Series, rows: np.ndarray, dtype: object) -> pd.Series:
    """``readings`` of some texts, indexed by position among them, indexed instead by
    those texts' ``rows``."""
    return pd.Series(
        readings.to_numpy(), index=rows[readings.index.to_numpy(dtype=np.int64)], dtype=dtype
    )


def _html_read(texts: pd.Series, *, shown_only: bool = False) -> pd.Series:
    """``texts`` with each that may hold markup (:func:`may_hold_markup`) replaced by the
    text it shows and holds (:func:`gate.data.markup.html_as_text`), or the text it shows
    only (``shown_only``: :func:`gate.data.markup.html_shown_text`); the others as they
    are."""
    marked = may_hold_markup(texts)
    if not marked.any():
        return texts
    read = texts.copy()
    read[marked] = read_html_texts(texts[marked], shown_only=shown_only)
    return read


def _displayed(texts: pd.Series) -> pd.Series:
    """``texts`` with each that holds a character directing its layout
    (:data:`gate.data.bidi.DIRECTING`) replaced by the text its display reads
    (:func:`gate.data.bidi.displayed_text`); the others as they are (found by one RE2
    match each among the texts that are not ASCII)."""
    if not len(texts):
        return texts
    values = pa.array(texts.array)
    other = pc.fill_null(pc.invert(pc.string_is_ascii(values)), False)
    held = pc.match_substring_regex(pc.filter(values, other), DIRECTING)
    if not pc.any(held).as_py():
        return texts
    marked = other.to_numpy(zero_copy_only=False)
    marked[marked] = held.to_numpy(zero_copy_only=False)
    read = texts.copy()
    read[marked] = [displayed_text(text) for text in texts[marked]]
    return read


def _normalized_chunk(values: pa.Array, policy: TextPolicy) -> pa.Array:
    """:func:`normalize_text`'s first two steps on one Arrow array of strings: ``values``
    itself when every text is ASCII (without a control character to strip), else a new
    array."""
    other = pc.invert(pc.string_is_ascii(values))
    if policy.strip_invisible:
        other = pc.or_(other, pc.match_substring_regex(values, _ASCII_INVISIBLE))
    changed = pc.filter(values, other)
    if len(changed) == 0:
        return values
    if policy.strip_invisible:
        changed = pc.replace_substring_regex(changed, pattern=invisible_pattern(), replacement="")
        changed = pc.replace_substring_regex(
            changed, pattern=f"[{_BLANK_LOOKALIKES}]", replacement=" "
        )
    if policy.normalization != "none" or policy.fold_confusables:
        changed = pa.array([_normal_form(t, policy) for t in changed.to_pylist()], type=values.type)
    return pc.replace_with_mask(values, other, changed)


def _normal_form(text: str, policy: TextPolicy) -> str:
    """``text`` folded (``fold_confusables``) on its decomposition, then in the policy's
    normal form; with ``normalization: none`` folded as it stands."""
    form = policy.normalization
    fold = functools.partial(fold_confusables, casefold=policy.casefold)
    if form == "none":
        return fold(text, decompose=None) if policy.fold_confusables else text
    if form == "NFKC" and policy.strip_invisible and _TATWEEL_FORMS.search(text):
        # their compatibility decomposition holds a tatweel (U+FE71 is tatweel + fathatan):
        # removed before the fold, which it would keep from folding its word's letters
        text = unicodedata.normalize("NFKD", text).replace(_TATWEEL, "")
    if policy.fold_confusables:
        text = fold(text, decompose="NFKD" if form == "NFKC" else "NFD")
    return unicodedata.normalize(form, text)


# The characters ``str.isspace()`` is true for (Unicode White_Space, plus the ASCII
# separators U+001C-U+001F); tests/test_bundle.py checks this against every code point.
WHITE_SPACE = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
    "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


def re2_characters(characters: str) -> str:
    """``characters`` escaped for a class of RE2's syntax (``[...]``: ``\\x{...}`` each)."""
    return "".join(f"\\x{{{ord(c):X}}}" for c in characters)


# A character that ``str.strip()`` keeps, in RE2's syntax (whose ``\\S`` knows ASCII white
# space only).
_NOT_SPACE = f"[^{re2_characters(WHITE_SPACE)}]"


def visible_texts(texts: pd.Series) -> pd.Series:
    """Whether each text holds a character that is not white space (one RE2 match each)."""
    return pd.Series(
        pc.match_substring_regex(pa.array(texts.array), _NOT_SPACE).to_numpy(zero_copy_only=False),
        index=texts.index,
    )
