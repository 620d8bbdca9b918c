"""The ``digits`` disclosure class: runs of at least ``min_digits`` digits (order numbers,
account numbers) held by at most ``max_users`` users and found in the release; and the
``digits`` membership scorer: a user's count of such runs found in the release."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd
from pydantic import Field

from gate.audits.feature_store import (
    ClassDisclosures,
    DisclosureClass,
    FeatureStore,
    WitnessCandidates,
)
from gate.audits.membership import MembershipScorer
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
        return ClassDisclosures(
            feature_class="digits",
            rare_features=found.rare_features,
            disclosed_features=found.disclosed_features,
            record_counts=found.record_counts,
            user_counts=found.user_counts,
            candidates=WitnessCandidates(
                source_rows=found.witness_record,
                synthetic_rows=found.witness_synthetic,
                scores=found.record_counts[found.witness_record].astype(np.float64),
                feature_text=lambda i: str(values[int(found.witness_code[i])]),
            ),
        )


class DigitsScorerConfig(ScorerConfig):
    scorer: Literal["digits"] = "digits"
    features: DigitsFeatures = Field(default_factory=DigitsFeatures)


class DigitsScorer(MembershipScorer[DigitsScorerConfig]):
    name = "digits"
    config_model = DigitsScorerConfig

    def user_scores(
        self, bundle: Bundle, config: DigitsScorerConfig, store: FeatureStore
    ) -> np.ndarray:
        return store.disclosures(config.features).user_counts.astype(np.float64)
