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
``tests/test_pii.py`` compares the windowed and the original recognizers on real-length
e-mails and on adversarial texts.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import regex
from presidio_analyzer import RecognizerResult
from presidio_analyzer.predefined_recognizers import (
    EmailRecognizer,
    IpRecognizer,
    PhoneRecognizer,
    UrlRecognizer,
)

Span = tuple[int, int]

PHONE_MARGIN = 32
# phonenumbers matches with the standard library's ``re``; Presidio's pattern recognizers
# with the ``regex`` module, whose ``\s`` differs (it excludes U+001C-U+001F): the
# tokens are cut where Presidio's own patterns see whitespace
_PHONE_TRIGGER = re.compile(r"[ \u00a0\t,\-]*\d+[ \u00a0\t,]*")
_URL_TOKEN = regex.compile(r"(?<!\S)\S*?\.\w\S*")
_EMAIL_TOKEN = regex.compile(r"(?<!\S)[^\s@]*@\S*")
_IP_TOKEN = regex.compile(r"(?<!\S)[^\s\d:]*[\d:]\S*")


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


class WindowedPhoneRecognizer(_Windowed, PhoneRecognizer):
    pattern = _PHONE_TRIGGER
    margin = PHONE_MARGIN
    separator = "\n"


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
