"""The gate's own Presidio recognizers, for what a release can write to keep an
identifier from Presidio's stock patterns while a reader still reads it."""

from __future__ import annotations

from typing import Any, ClassVar

import tldextract.tldextract
from presidio_analyzer import AnalysisExplanation, LocalRecognizer, RecognizerResult

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
