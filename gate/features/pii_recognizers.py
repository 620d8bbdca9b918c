"""The gate's own Presidio recognizers, for what a release can write to keep an
identifier from Presidio's stock patterns while a reader still reads it."""

from __future__ import annotations

import re
from typing import Any, ClassVar

import tldextract.tldextract
from presidio_analyzer import AnalysisExplanation, LocalRecognizer, Pattern, RecognizerResult
from presidio_analyzer.predefined_recognizers import CreditCardRecognizer

from gate.features.email_forms import written_out_emails


class ObfuscatedEmailRecognizer(LocalRecognizer):
    """E-mail addresses with "@" or "." written out
    (:func:`gate.features.email_forms.written_out_emails`) whose domain ends in a public
    suffix, checked as Presidio's e-mail recognizer checks its matches (tldextract's
    extractor, which :func:`gate.features.pii.build_analyzer` points at the bundled
    list). Scored as Presidio scores a plain address (0.5; context words raise it under
    the spaCy engine)."""

    NAME = "ObfuscatedEmailRecognizer"
    SCORE = 0.5
    CONTEXT: ClassVar[list[str]] = ["email", "e-mail", "mail", "contact"]

    def __init__(self, supported_language: str = "en") -> None:
        super().__init__(
            supported_entities=["EMAIL_ADDRESS"],
            supported_language=supported_language,
            name=self.NAME,
            context=list(self.CONTEXT),
        )

    def load(self) -> None:
        """Presidio's hook for loading a model: this recognizer has none (its patterns
        are compiled with :mod:`gate.features.email_forms`)."""

    def analyze(
        self, text: str, entities: list[str], nlp_artifacts: Any = None
    ) -> list[RecognizerResult]:
        if "EMAIL_ADDRESS" not in entities:
            return []
        extract = tldextract.tldextract.TLD_EXTRACTOR
        return [
            RecognizerResult(
                entity_type="EMAIL_ADDRESS",
                start=start,
                end=end,
                score=self.SCORE,
                analysis_explanation=AnalysisExplanation(
                    recognizer=self.NAME,
                    original_score=self.SCORE,
                    textual_explanation="an e-mail address with '@' or '.' written out",
                ),
                recognition_metadata={
                    RecognizerResult.RECOGNIZER_NAME_KEY: self.NAME,
                    RecognizerResult.RECOGNIZER_IDENTIFIER_KEY: self.id,
                },
            )
            for start, end in written_out_emails(
                text, public_domain=lambda domain: extract(domain).fqdn != ""
            )
        ]


# Between a card number's digit groups: up to three blanks, line breaks, dashes of any
# kind, dots, slashes, underscores, middle dots, bullets or bars (Presidio's pattern
# allows one hyphen or space).
_CARD_SEPARATOR = r"[\s\-\u2010-\u2015./_\u00b7\u2022|]{1,3}"
_NON_DIGITS = re.compile(r"\D+")


class SeparatedCardRecognizer(CreditCardRecognizer):
    """Card numbers whose digit groups another separator divides, or a line break
    (``4807.3021.5736.8199``, ``4807 – 3021 – 5736 – 8199``, ``4807 3021`` at the end of
    a line and ``5736 8199`` at the start of the next; a review hid train cards so):
    Presidio's card pattern with these separators, its Luhn check on the digits."""

    NAME = "SeparatedCardRecognizer"
    PATTERN = _CARD_SEPARATOR.join(
        (  # Presidio's groups
            r"\b(?!1\d{12}(?!\d))((4\d{3})|(5[0-5]\d{2})|(6\d{3})|(1\d{3})|(3\d{3}))",
            r"(\d{3,4})",
            r"(\d{3,4})",
            r"(\d{3,5})\b",
        )
    )

    def __init__(self, supported_language: str = "en") -> None:
        super().__init__(
            patterns=[Pattern("Credit cards, other separators (weak)", self.PATTERN, 0.3)],
            supported_language=supported_language,
            name=self.NAME,
        )

    def validate_result(self, pattern_text: str) -> bool:
        """Presidio's Luhn check of the digits alone (its own check would read the other
        separators as digits)."""
        return bool(super().validate_result(_NON_DIGITS.sub("", pattern_text)))
