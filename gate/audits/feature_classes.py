"""The built-in disclosure classes: ``ngram`` (regurgitated token n-grams), ``pii``
(Presidio entities) and ``semantic`` (near-copies of semantically rare records)."""

from __future__ import annotations

from dataclasses import asdict, replace

import numpy as np
import pandas as pd
import pyarrow as pa

from gate.audits.feature_store import (
    ClassDisclosures,
    DisclosureClass,
    FeatureStore,
    WitnessCandidates,
    counted_disclosures,
)
from gate.data.bundle import Bundle
from gate.features.distinctive_matches import distinctive_matches
from gate.features.matching import coded_disclosures
from gate.features.number_runs import (
    ACCOUNT_FORM,
    ACCOUNT_TYPES,
    NUMBER_FORM,
    NUMBER_TYPES,
    numbers_held,
)
from gate.features.tokenize import arrow_texts, tokenize
from gate.plugins import DISCLOSURE_CLASSES
from gate.policy.models import NgramFeatures, PiiFeatures, SemanticFeatures


@DISCLOSURE_CLASSES.register("ngram")
class NgramClass(DisclosureClass[NgramFeatures]):
    name = "ngram"
    config_model = NgramFeatures

    def disclosures(
        self, bundle: Bundle, config: NgramFeatures, store: FeatureStore
    ) -> ClassDisclosures:
        source_texts = bundle.source["text"]
        release = arrow_texts(pa.array(bundle.synthetic["text"]))  # uncopied
        other = None
        if bundle.release_written is not None:
            with store.progress.step("reading the release again (joined words, deleted spaces)"):
                other = bundle.release_other_readings  # made on first use
        if other is not None and len(other):  # a feature of any reading is disclosed
            release = pa.chunked_array(
                release.chunks + arrow_texts(pa.array(other.array)).chunks, pa.large_string()
            )
        found = store.engine.ngram_disclosures(
            arrow_texts(pa.array(source_texts)),  # the frame's Arrow strings, uncopied
            release,
            users=bundle.user_codes,
            config=config,
            progress=store.progress,
        )
        details: dict[str, int] = {}
        if other is not None:
            rows = other.index.to_numpy(dtype=np.int64)
            details["release_records_read_again"] = int(np.unique(rows).size)
            details["release_readings_added"] = len(other)
            n_release = len(bundle.synthetic)
            read_again = found.witness_synthetic >= n_release
            if read_again.any():  # another reading's record is the release record read
                found = replace(
                    found,
                    witness_synthetic=np.where(
                        read_again,
                        rows[np.maximum(found.witness_synthetic - n_release, 0)],
                        found.witness_synthetic,
                    ),
                )

        def witness_text(i: int) -> str:
            record = tokenize(
                [str(source_texts.iloc[found.witness_record[i]])], **config.tokenizer_options()
            )
            return " ".join(
                record.tokens(int(found.witness_offset[i]), int(found.witness_length[i]))
            )

        return replace(counted_disclosures("ngram", found, witness_text), details=details)


@DISCLOSURE_CLASSES.register("pii")
class PiiClass(DisclosureClass[PiiFeatures]):
    name = "pii"
    config_model = PiiFeatures

    def disclosures(
        self, bundle: Bundle, config: PiiFeatures, store: FeatureStore
    ) -> ClassDisclosures:
        source_texts = bundle.source["text"].tolist()
        # one call: the local engine analyses a release text that repeats a source text once
        both = store.engine.detect_pii(
            source_texts + bundle.synthetic["text"].tolist(),
            config=config,
            progress=store.progress,
            description="PII in source and release",
        )
        source, release = both.split(len(source_texts))
        codes, values = pd.factorize(pd.Series(source.values + release.values, dtype=object))
        n_source = len(source.values)
        release_docs, release_codes = release.docs, codes[n_source:]
        details: dict[str, object] = {}
        if config.normalize:
            with store.progress.step("numbers of the source in the release, any grouping"):
                docs, number_codes = _numbers_in_release(
                    bundle.synthetic["text"].tolist(), values, np.unique(codes[:n_source])
                )
            details["values_found_only_in_another_grouping"] = int(
                np.setdiff1d(number_codes, release_codes).size
            )
            release_docs = np.concatenate([release_docs, docs])
            release_codes = np.concatenate([release_codes, number_codes])
        found = coded_disclosures(
            source_docs=source.docs,
            source_codes=codes[:n_source],
            synthetic_docs=release_docs,
            synthetic_codes=release_codes,
            users=bundle.user_codes,
            max_users=config.max_users,
        )
        surface: dict[str, str] = {}
        for value, raw in zip(source.values, source.raw, strict=True):
            surface.setdefault(value, raw)
        counted = counted_disclosures(
            "pii",
            found,
            lambda i: surface[values[int(found.witness_code[i])]],
            feature_ids=found.witness_code,
            feature_kind=lambda i: str(values[int(found.witness_code[i])]).split(":", 1)[0],
        )
        return replace(counted, details={**counted.details, **details})


def _numbers_in_release(
    release_texts: list[str], values: np.ndarray, source_codes: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(release record, code) for every source number that a release record holds in any
    grouping (:func:`numbers_held`): phone, card and social security numbers read as
    digits, IBANs and bank account numbers as upper-case letters and digits. A release
    writing ``123456789`` where the train wrote ``123-45-6789``, or an IBAN broken over a
    line, holds it, though no recognizer scores that form above the threshold."""
    docs, codes = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    if not len(source_codes):
        return docs[0], codes[0]
    typed = pd.Series(values[source_codes], dtype=object).str.split(":", n=1, expand=True)
    numbers = typed[1].fillna("")
    for types, letters, form in (
        (NUMBER_TYPES, False, NUMBER_FORM),
        (ACCOUNT_TYPES, True, ACCOUNT_FORM),
    ):
        chosen = (typed[0].isin(types) & numbers.str.fullmatch(form)).to_numpy()
        held, which = numbers_held(release_texts, numbers[chosen].tolist(), letters=letters)
        docs.append(held)
        codes.append(np.asarray(source_codes)[chosen][which].astype(np.int64))
    return np.concatenate(docs), np.concatenate(codes)


@DISCLOSURE_CLASSES.register("semantic")
class SemanticClass(DisclosureClass[SemanticFeatures]):
    """A semantically rare source record is disclosed when a release record is at least
    ``similarity_threshold`` cosine-similar to it and nearer to it than any record of
    another user (:mod:`gate.features.distinctive_matches`)."""

    name = "semantic"
    config_model = SemanticFeatures

    def disclosures(
        self, bundle: Bundle, config: SemanticFeatures, store: FeatureStore
    ) -> ClassDisclosures:
        rare = store.rare_records(config)
        _, neighbour_search = store.neighbour_density(config)
        found = store.window_embeddings(config)
        users = bundle.user_codes
        with store.progress.step("release matches nearer than other users' records"):
            matches = distinctive_matches(
                source_windows=found.source_windows,
                source_owner=found.source_owner,
                source_users=users,
                release_windows=found.release_windows,
                release_owner=found.release_owner,
                threshold=config.similarity_threshold,
                search=store.knn(config),
            )
        disclosed = rare & matches.matched
        record_counts = disclosed.astype(np.int64)
        rows = np.nonzero(disclosed)[0]
        texts = bundle.source["text"].to_numpy()
        return ClassDisclosures(
            feature_class="semantic",
            rare_features=int(rare.sum()),
            disclosed_features=int(disclosed.sum()),
            record_counts=record_counts,
            user_counts=np.bincount(users, weights=record_counts, minlength=users.max() + 1).astype(
                np.int64
            ),
            candidates=WitnessCandidates(
                source_rows=rows,
                synthetic_rows=matches.release[rows],
                scores=matches.similarity[rows],
                feature_text=lambda i: str(texts[rows[i]]),
            ),
            details={
                # rare records a release record reaches at the threshold, but no nearer than
                # another user's record (shared boilerplate, a copy of a neighbour)
                "rare_matches_other_users_explain": int((rare & matches.explained).sum()),
                "nearest_release_search": asdict(matches.release_search),
                "neighbour_search": asdict(neighbour_search),
                "windows": {"mode": config.windows, **store.window_embeddings(config).summary()},
            },
            rare_records=rare,
        )
