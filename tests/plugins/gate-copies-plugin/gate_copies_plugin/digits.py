"""The ``digits`` disclosure class: runs of at least ``min_digits`` digits (order numbers,
account numbers) held by at most ``max_users`` users and found in the release; and the
``digits`` membership scorer: a user's count of such runs found in the release."""

from __future__ import annotations

from typing import Literal

import pandas as pd
from pydantic import Field

from gate.audits.feature_store import (
    ClassDisclosures,
    DisclosureClass,
    FeatureStore,
    counted_disclosures,
)
from gate.audits.membership import DisclosureCountScorer
from gate.data.bundle import Bundle
from gate.features.matching import coded_disclosures
from gate.policy.models import FeatureClassConfig, ScorerConfig


class DigitsFeatures(FeatureClassConfig):
    feature_class: Literal["digits"] = Field("digits", alias="class")
    min_digits: int = Field(6, ge=2, le=64)
    max_users: int = Field(1, ge=1)


def _occurrences(texts: pd.Series, min_digits: int) -> pd.DataFrame:
    found = texts.str.extractall(rf"(\d{{{min_digits},}})")
    return pd.DataFrame(
        {"doc": found.index.get_level_values(0).to_numpy(), "value": found[0].to_numpy()}
    )


class DigitsClass(DisclosureClass[DigitsFeatures]):
    name = "digits"
    config_model = DigitsFeatures

    def disclosures(
        self, bundle: Bundle, config: DigitsFeatures, store: FeatureStore
    ) -> ClassDisclosures:
        source = _occurrences(bundle.source["text"].reset_index(drop=True), config.min_digits)
        release = _occurrences(bundle.synthetic["text"].reset_index(drop=True), config.min_digits)
        codes, values = pd.factorize(pd.concat([source["value"], release["value"]]))
        found = coded_disclosures(
            source_docs=source["doc"].to_numpy(),
            source_codes=codes[: len(source)],
            synthetic_docs=release["doc"].to_numpy(),
            synthetic_codes=codes[len(source) :],
            users=bundle.user_codes,
            max_users=config.max_users,
        )
        return counted_disclosures(
            "digits", found, lambda i: str(values[int(found.witness_code[i])])
        )


class DigitsScorerConfig(ScorerConfig):
    scorer: Literal["digits"] = "digits"
    features: DigitsFeatures = Field(default_factory=DigitsFeatures)


class DigitsScorer(DisclosureCountScorer[DigitsScorerConfig]):
    """A user's score: its rare digit runs found in the release."""

    name = "digits"
    config_model = DigitsScorerConfig
    default_features = DigitsFeatures
