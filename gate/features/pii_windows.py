"""Presidio's scanning recognizers run on the parts of a text that can hold a match.

On real-length e-mails the patterns engine spends most of its time scanning whole texts:
the phone recognizer runs ``phonenumbers.PhoneNumberMatcher`` once per supported region
(8 scans), the URL, e-mail and IP recognizers run long regular expressions over every
character. A match of each needs a *trigger*: a digit (phone numbers), ``.`` followed by a
word character (a URL's top-level domain), ``@`` (e-mail) or a digit or ``:`` (IP). These
recognizers are Presidio's own, subclassed: ``analyze`` cuts the text into the windows
around its triggers, runs the original ``analyze`` once on the windows joined by a
separator, and shifts the results back to offsets in the text.

Why the detections are the same as on the whole text:

* URL, e-mail and IP matches hold no whitespace (as the ``regex`` module, which Presidio
  matches with, defines it), and their patterns look at most one character beyond a
  match (``\\b``, ``(?<![\\w:])``): each window is a whole whitespace-delimited token,
  and the separator is a space;
* a phone candidate of ``phonenumbers`` starts at most 10 characters before its first
  digit and ends at its last digit (or one ``#`` later); between digits it allows at most
  4 punctuation characters, or an extension label between runs of blanks, commas and
  hyphens. The matcher's checks look one character before a candidate and three after
  it. Each digit run with the blanks, commas and hyphens around it is a trigger, widened
  by :data:`PHONE_MARGIN` characters on each side, and windows that meet are merged; the
  separator is a newline, which no phone pattern holds.

A result that still crossed a separator would mean the reasoning above failed for some
text: the text is then analysed whole, as Presidio would (never fewer detections).

What is left of the phone recognizer's cost is ``phonenumbers`` parsing and validating
each candidate (dates, amounts, times, street numbers, and the numbers themselves) once
per region. That verdict depends on the candidate, the region, the leniency and whether
the character before and the one after the candidate are Latin letters or invalid
punctuation (``%``, currency signs), nothing else; :class:`MemoPhoneRecognizer` remembers
it (least recently used first out), so a candidate seen again in such a context is not
parsed again; a candidate with fewer digits than any valid number it could parse into
(from ``phonenumbers``' metadata: the shortest valid national number of the region, or a
country code and the shortest valid number anywhere after a plus sign or the region's
exit code) is rejected without parsing; and its matcher runs once for region codes
``phonenumbers`` parses alike (codes it does not know, such as "UK"; Presidio's default
regions are all known). Its regions and leniency are read when it is built.

The windowed phone recognizer also finds the numbers a line break or tab breaks, and
those whose groups are separated by characters phonenumbers does not read
(:class:`WindowedPhoneRecognizer`, :mod:`gate.features.phone_forms`), which Presidio's
does not.

``tests/test_pii_windows.py`` compares the windowed and the original recognizers on
real-length e-mails and on adversarial texts.
"""

from __future__ import annotations

import copy
import re
from functools import cache, lru_cache
from typing import Any

import numpy as np
import phonenumbers
from phonenumbers import (
    Leniency,
    NumberParseException,
    PhoneMetadata,
    PhoneNumber,
    PhoneNumberMatch,
    PhoneNumberMatcher,
)
from phonenumbers.unicode_util import digit as unicode_digit
from presidio_analyzer import EntityRecognizer, RecognizerResult
from presidio_analyzer.predefined_recognizers import (
    EmailRecognizer,
    IpRecognizer,
    PhoneRecognizer,
    UrlRecognizer,
)

from gate.features.phone_forms import (
    BREAK_IN_NUMBER,
    breaks_in_numbers_as_spaces,
    separators_in_numbers_as_hyphens,
)

Span = tuple[int, int]

PHONE_MARGIN = 32
# verdicts remembered per phone recognizer (205-270 bytes each: 27-35 MB)
PHONE_VERDICTS = 1 << 17
# phonenumbers matches with the standard library's ``re``; Presidio's pattern recognizers
# with the ``regex`` module, whose ``\s`` differs (it excludes U+001C-U+001F): the
# tokens are cut where Presidio's own patterns see whitespace. They are found with
# ``re`` (3x faster here) and this class, the 25 characters of ``regex``'s ``\s``.
REGEX_BLANKS = r"\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
# characters after a break in a number (BREAK_IN_NUMBER) read again on their own (a
# number starting the line)
AFTER_BREAK = 64
# what a number read on its own line scores above its reading joined to the line before:
# Presidio drops a result that another of the same type contains unless it scores higher
OWN_LINE_SCORE_STEP = 1e-6


_PHONE_TRIGGER = re.compile(r"[ \u00a0\t,\-]*\d+[ \u00a0\t,]*")
_TOKEN_START = rf"(?<![^{REGEX_BLANKS}])"
_REST = rf"[^{REGEX_BLANKS}]*"
# a "." followed by any non-blank (a superset of ``regex``'s word characters)
_URL_TOKEN = re.compile(rf"{_TOKEN_START}[^{REGEX_BLANKS}.]*\.[^{REGEX_BLANKS}]{_REST}")
_EMAIL_TOKEN = re.compile(rf"{_TOKEN_START}[^{REGEX_BLANKS}@]*@{_REST}")
# an ASCII digit, ":" or any non-ASCII non-blank (a superset of ``regex``'s digits,
# whose Unicode tables may be newer than the standard library's)
_IP_TOKEN = re.compile(
    rf"{_TOKEN_START}[^{REGEX_BLANKS}0-9:\x80-\U0010ffff]*(?:[0-9:]|[^\x00-\x7f{REGEX_BLANKS}]){_REST}"
)


def token_windows(text: str, token: Any) -> list[Span]:
    """The whitespace-delimited tokens that ``token`` finds (it must match whole tokens)."""
    return [m.span() for m in token.finditer(text)]


def margin_windows(text: str, trigger: re.Pattern[str], *, margin: int) -> list[Span]:
    """Trigger matches widened by ``margin`` characters each side, clipped to the text;
    windows that overlap or touch are merged."""
    spans = np.array([m.span() for m in trigger.finditer(text)], dtype=np.int64).reshape(-1, 2)
    if spans.shape[0] == 0:
        return []
    lo = np.maximum(spans[:, 0] - margin, 0)
    hi = np.minimum(spans[:, 1] + margin, len(text))
    reach = np.maximum.accumulate(hi)
    first = np.concatenate([[True], lo[1:] > reach[:-1]])
    starts = lo[first]
    ends = reach[np.concatenate([np.flatnonzero(first)[1:] - 1, [len(hi) - 1]])]
    return list(zip(starts.tolist(), ends.tolist(), strict=True))


def _joined(text: str, windows: list[Span], separator: str) -> tuple[str, np.ndarray]:
    """The windows joined by ``separator`` and where each starts in the joined text."""
    lengths = np.array([e - s for s, e in windows], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths + len(separator))[:-1]])
    return separator.join(text[s:e] for s, e in windows), starts


class _Windowed:
    """Runs the recognizer's own ``analyze`` on the windows of a text that can hold a match:
    the whole tokens ``pattern`` finds, or (``margin`` set) its matches widened by
    ``margin`` characters and merged."""

    pattern: Any
    margin: int | None = None
    separator = " "

    def windows(self, text: str) -> list[Span]:
        if self.margin is None:
            return token_windows(text, self.pattern)
        return margin_windows(text, self.pattern, margin=self.margin)

    def analyze(
        self, text: str, entities: list[str], nlp_artifacts: Any = None, *args: Any, **kwargs: Any
    ) -> list[RecognizerResult]:
        whole = super().analyze  # type: ignore[misc]
        windows = self.windows(text)
        if not windows:
            return []
        if windows == [(0, len(text))]:
            return list(whole(text, entities, nlp_artifacts, *args, **kwargs))
        joined, at = _joined(text, windows, self.separator)
        results = list(whole(joined, entities, nlp_artifacts, *args, **kwargs))
        if not results:
            return results
        begins = np.array([r.start for r in results], dtype=np.int64)
        finishes = np.array([r.end for r in results], dtype=np.int64)
        which = np.searchsorted(at, begins, side="right") - 1
        lengths = np.array([e - s for s, e in windows], dtype=np.int64)
        if np.any(which < 0) or np.any(finishes > at[which] + lengths[which]):
            return list(whole(text, entities, nlp_artifacts, *args, **kwargs))
        shift = np.array([s for s, _ in windows], dtype=np.int64)[which] - at[which]
        for result, delta in zip(results, shift.tolist(), strict=True):
            result.start += delta
            result.end += delta
        return results


@lru_cache(maxsize=4096)
def neighbour_class(character: str) -> str:
    """The character that stands for ``character`` next to a phone candidate: the matcher
    asks of a neighbour only whether it is a Latin letter or an invalid punctuation symbol
    (``%``, a currency sign), so ``"a"`` for those and ``" "`` for any other."""
    letter = PhoneNumberMatcher._is_latin_letter(character)
    return "a" if letter or PhoneNumberMatcher._is_invalid_punctuation_symbol(character) else " "


_GROUP_REFERENCE = re.compile(r"\\g<\d+>|\\\d+|\$\d+")
_PLUS_SIGNS = "+\uff0b"  # phonenumbers' plus characters
# where phonenumbers starts reading a number (its _VALID_START_CHAR): a plus sign or a digit
_NUMBER_START = re.compile(f"[{_PLUS_SIGNS}\\d]")


def _country_metadata(country_code: int) -> list[PhoneMetadata | None]:
    """The metadata of every region of a country code (None where it has none)."""
    return [
        PhoneMetadata.metadata_for_nongeo_region(country_code, None)
        if region == phonenumbers.REGION_CODE_FOR_NON_GEO_ENTITY
        else PhoneMetadata.metadata_for_region(region, None)
        for region in phonenumbers.COUNTRY_CODE_TO_REGION_CODE.get(country_code, ())
    ]


def _transform_digits(metadata: PhoneMetadata | None) -> int:
    """Digits a region's national-prefix transform rule writes (its literal digits)."""
    rule = "" if metadata is None else metadata.national_prefix_transform_rule or ""
    return sum(c.isdigit() for c in _GROUP_REFERENCE.sub("", rule))


@cache
def _shortest_valid_length(country_code: int) -> int:
    """The shortest national significant number valid in some region of a country code
    (``is_valid_number`` accepts a number of any of them if its length is one of that
    region's general description's), 0 if a region has no lengths."""
    shortest = []
    for metadata in _country_metadata(country_code):
        general = None if metadata is None else metadata.general_desc
        lengths = [n for n in (general.possible_length or ()) if n > 0] if general else []
        if not lengths:
            return 0
        shortest.append(min(lengths))
    return min(shortest, default=0)


@cache
def _fewest_international_digits() -> int:
    """Fewest digits after a plus sign or an exit code: a country code and a valid
    national number of one of its regions, less the digits a transform rule of any of
    them may write."""
    return min(
        len(str(code))
        + max(
            _shortest_valid_length(code)
            - max((_transform_digits(m) for m in _country_metadata(code)), default=0),
            0,
        )
        for code in phonenumbers.COUNTRY_CODE_TO_REGION_CODE
    )


def _fewest_exit_code_digits(pattern: str | None) -> int:
    """Digits the shortest match of an exit-code (IDD) pattern takes, up to 4."""
    if not pattern:
        return 0
    compiled = re.compile(pattern)
    for length in range(1, 4):
        if any(compiled.fullmatch(str(k).zfill(length)) for k in range(10**length)):
            return length
    return 4


@lru_cache(maxsize=256)
def fewest_valid_digits(region: str, *, plus: bool) -> int:
    """A lower bound on the digits of a candidate that ``phonenumbers`` parses, for the
    default ``region``, into a valid number (leniency ``VALID`` or stricter).

    Validity needs the national significant number's length among the possible lengths
    of the general description of a region of its country code (``is_valid_number``),
    and every digit of that number comes from the candidate, except those a
    national-prefix transform rule writes (counted off). The number is national to
    ``region`` (a country code of its own), or its country code follows a plus sign
    where the number starts (``plus``) or ``region``'s exit code."""
    abroad = _fewest_international_digits()
    metadata = PhoneMetadata.metadata_for_region(region, None)
    if plus or metadata is None:
        return abroad
    national = _shortest_valid_length(metadata.country_code) - _transform_digits(metadata)
    return min(max(national, 0), _fewest_exit_code_digits(metadata.international_prefix) + abroad)


def candidate_verdict(
    candidate: str, region: str, leniency: int, before: str, after: str
) -> PhoneNumber | None:
    """The number ``phonenumbers``' matcher finds in ``candidate`` for ``region`` at
    ``leniency``, or None, when the characters next to the candidate are ``before`` and
    ``after`` ("" at the text's ends): the matcher's own check, on a text of just these,
    unless the candidate has fewer digits than any valid number (:func:`fewest_valid_digits`;
    a candidate with letters, which may stand for digits, is always checked)."""
    if Leniency.VALID <= leniency <= Leniency.EXACT_GROUPING and not any(
        c.isalpha() for c in candidate
    ):
        start = _NUMBER_START.search(candidate)
        plus = start is not None and start.group() in _PLUS_SIGNS
        digits = sum(unicode_digit(c, -1) != -1 for c in candidate)
        if digits < fewest_valid_digits(region, plus=plus):
            return None
    return matcher_verdict(candidate, region, leniency, before, after)


def matcher_verdict(
    candidate: str, region: str, leniency: int, before: str, after: str
) -> PhoneNumber | None:
    """:func:`candidate_verdict` by the matcher's own check alone."""
    matcher = PhoneNumberMatcher(before + candidate + after, region, leniency=leniency)
    match = matcher._parse_and_verify(candidate, len(before))
    return None if match is None else match.number


class _MemoMatcher(PhoneNumberMatcher):
    """``phonenumbers``' matcher asking ``verdict`` (a memo of :func:`candidate_verdict`)
    instead of parsing each candidate itself."""

    def __init__(self, text: str, region: str, *, leniency: int, verdict: Any) -> None:
        super().__init__(text, region, leniency=leniency)
        self._verdict = verdict

    def _parse_and_verify(self, candidate: str, offset: int) -> PhoneNumberMatch | None:
        end = offset + len(candidate)
        number = self._verdict(
            candidate,
            self.preferred_region,
            self.leniency,
            neighbour_class(self.text[offset - 1]) if offset > 0 else "",
            neighbour_class(self.text[end]) if end < len(self.text) else "",
        )
        return None if number is None else PhoneNumberMatch(offset, candidate, copy.copy(number))


def distinct_matcher_regions(regions: list[str]) -> list[str]:
    """``regions`` without those whose matcher finds what an earlier one's found.

    A matcher uses its region only to parse candidates (``phonenumbers.parse(candidate,
    region)``), and ``parse`` treats alike every code that is not a supported region and
    has no metadata (such as "UK" or "FE"; Presidio's default regions are all known):
    only a number written with "+" parses, whatever the code. Of those, the first is kept;
    an entry that is not a string is kept as it is."""
    kept: list[str] = []
    unknown_kept = False
    for region in regions:
        unknown = isinstance(region, str) and (
            region not in phonenumbers.SUPPORTED_REGIONS
            and region.upper() not in phonenumbers.SUPPORTED_REGIONS
            and region.upper() not in {"001", phonenumbers.UNKNOWN_REGION}
            and phonenumbers.PhoneMetadata.metadata_for_region(region.upper(), None) is None
        )
        if unknown and unknown_kept:
            continue
        unknown_kept = unknown_kept or unknown
        kept.append(region)
    return kept


class MemoPhoneRecognizer(PhoneRecognizer):
    """Presidio's phone recognizer whose matchers remember each candidate's verdict
    (:data:`PHONE_VERDICTS` of them) and run once for regions that parse alike;
    ``analyze`` is Presidio's, with that matcher."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not isinstance(self.leniency, int):
            raise ValueError(
                f"leniency: one of phonenumbers.Leniency (0-3) is required, found {self.leniency!r}"
            )
        self._matcher_leniency: int = self.leniency
        self.verdict = lru_cache(maxsize=PHONE_VERDICTS)(candidate_verdict)
        self.matched_regions = distinct_matcher_regions(self.supported_regions)

    def analyze(
        self, text: str, entities: list[str], nlp_artifacts: Any = None
    ) -> list[RecognizerResult]:
        results = []
        for region in self.matched_regions:
            matches = _MemoMatcher(
                text, region, leniency=self._matcher_leniency, verdict=self.verdict
            )
            # as Presidio: the region a number parses to names it in the explanation, and
            # stays the name of the next matches that do not parse without one
            named: str | None = region
            for match in matches:
                try:
                    parsed = phonenumbers.parse(text[match.start : match.end])
                    named = phonenumbers.region_code_for_number(parsed)
                except NumberParseException:
                    pass
                results.append(self._get_recognizer_result(match, text, named, nlp_artifacts))
        return EntityRecognizer.remove_duplicates(results)


class WindowedPhoneRecognizer(_Windowed, MemoPhoneRecognizer):
    """The windowed phone recognizer. It also finds the numbers line breaks or tabs
    break, or whose digit groups are separated by characters phonenumbers does not read,
    as a reader reads them: ``775-568-`` at the end of a line and ``2052`` at the start of
    the next is one number (a review's release broke the train numbers so, and Presidio
    found none), and so is ``775·568·2052``. It reads the text again with such
    separators as hyphens, then such breaks as spaces (a break after a separator is then
    between two characters of the number), and the
    :data:`AFTER_BREAK` characters after each break on their own: that reading
    joins a number to what ends the line before ("Paid 313.87.", a list's "44.", "item
    4"), and can make it another or none. What these readings find is added to what the
    text as written gives, where it overlaps nothing found there (so a number that needs
    no reading is never lost or changed by one); a number read on its own line scores
    :data:`OWN_LINE_SCORE_STEP` more, so that Presidio keeps it beside the joined
    reading that contains it (both are values of the text: the reader's is one of them)."""

    pattern = _PHONE_TRIGGER
    margin = PHONE_MARGIN
    separator = "\n"

    def analyze(
        self, text: str, entities: list[str], nlp_artifacts: Any = None, *args: Any, **kwargs: Any
    ) -> list[RecognizerResult]:
        found = super().analyze(text, entities, nlp_artifacts, *args, **kwargs)
        hyphenated = separators_in_numbers_as_hyphens(text)
        read = breaks_in_numbers_as_spaces(hyphenated)
        if read == text:
            return found
        extra = super().analyze(read, entities, nlp_artifacts, *args, **kwargs)
        for broken in BREAK_IN_NUMBER.finditer(hyphenated):
            start = broken.end()
            line = read[start : start + AFTER_BREAK]
            for result in MemoPhoneRecognizer.analyze(self, line, entities, nlp_artifacts):
                result.start += start
                result.end += start
                result.score = min(result.score + OWN_LINE_SCORE_STEP, 1.0)
                extra.append(result)
        spans = {(r.start, r.end) for r in found}
        added = set()
        for result in extra:
            span = (result.start, result.end)
            if span not in added and all(result.end <= s or result.start >= e for s, e in spans):
                found.append(result)
                added.add(span)
        return found


class WindowedUrlRecognizer(_Windowed, UrlRecognizer):
    pattern = _URL_TOKEN


class WindowedEmailRecognizer(_Windowed, EmailRecognizer):
    pattern = _EMAIL_TOKEN


class WindowedIpRecognizer(_Windowed, IpRecognizer):
    pattern = _IP_TOKEN


def _windowed_copy(recognizer: Any) -> Any | None:
    """The windowed twin of one of Presidio's stock recognizers (same name, language,
    context and settings), or None for any other recognizer."""
    common = {
        "context": recognizer.context,
        "supported_language": recognizer.supported_language,
        "name": recognizer.name,
    }
    kind = type(recognizer)
    if kind is PhoneRecognizer:
        return WindowedPhoneRecognizer(
            supported_entity=recognizer.supported_entities[0],
            supported_regions=recognizer.supported_regions,
            leniency=recognizer.leniency,
            **common,
        )
    twins = {
        UrlRecognizer: WindowedUrlRecognizer,
        EmailRecognizer: WindowedEmailRecognizer,
        IpRecognizer: WindowedIpRecognizer,
    }
    if kind in twins:
        return twins[kind](
            patterns=recognizer.patterns,
            supported_entity=recognizer.supported_entities[0],
            **common,
        )
    return None


def window_recognizers(registry: Any) -> int:
    """Replace Presidio's phone, URL, e-mail and IP recognizers in ``registry`` by their
    windowed twins, in place and in the same order; returns how many were replaced."""
    replaced = 0
    for i, recognizer in enumerate(registry.recognizers):
        twin = _windowed_copy(recognizer)
        if twin is not None:
            registry.recognizers[i] = twin
            replaced += 1
    return replaced
