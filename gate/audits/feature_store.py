"""Disclosure classes as plug-ins, and the per-run store that computes each class (and
each set of embeddings) once for every audit that asks for the same configuration."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

import numpy as np

from gate.plugins import DISCLOSURE_CLASSES
from gate.policy.models import FeatureClassConfig, SemanticFeatures
from gate.registry import PluginUnavailableError

if TYPE_CHECKING:
    from gate.data.bundle import Bundle
    from gate.engines.base import Engine
    from gate.features.embeddings import KnnSearch
    from gate.progress import Progress

ClassConfigT = TypeVar("ClassConfigT", bound=FeatureClassConfig)


@dataclass(frozen=True)
class WitnessCandidates:
    """For each source row with a disclosure: the row, a synthetic row carrying its
    strongest disclosed feature, and a score (disclosed features in the row, or the
    similarity of a semantic pair). ``feature_text(i)`` gives candidate ``i``'s feature;
    it runs only for the few witnesses that are reported."""

    source_rows: np.ndarray
    synthetic_rows: np.ndarray
    scores: np.ndarray
    feature_text: Callable[[int], str]
    # an integer per candidate naming its feature: one witness per feature, the records
    # that carry it counted (None: every candidate is its own feature)
    feature_ids: np.ndarray | None = None
    feature_kind: Callable[[int], str] | None = None  # e.g. the PII entity type


KNN_SEED = 0  # seed of the k-means of an approximate (IVF) nearest-neighbour index


@dataclass(frozen=True)
class ClassDisclosures:
    """Rare features of one class and those the release discloses, counted per source
    record and per user (users are the unit of every test)."""

    feature_class: str
    rare_features: int
    disclosed_features: int
    record_counts: np.ndarray  # per source row
    user_counts: np.ndarray  # per user code (Bundle.user_codes)
    candidates: WitnessCandidates
    details: Mapping[str, Any] = field(default_factory=dict)  # for the report (JSON-safe)
    # per source row: it holds a rare feature (a release copying it would disclose one);
    # None from a plug-in that does not say, and then every user is taken to hold one
    rare_records: np.ndarray | None = None


def require_rare_features(found: ClassDisclosures, *, records: int) -> None:
    """Refuse a class that found no rare feature in the ``records`` source records: its
    counts are 0 for every user whatever the release holds (a copy of every train record
    included), so a check on them, or a score made of them, cannot fail.

    Raises:
        AuditError: naming the class and what to change.
    """
    if found.rare_features > 0:
        return
    from gate.errors import AuditError

    hints = {
        "ngram": "texts shorter than n_min tokens have no n-gram: lower n_min",
        "pii": "the recognizers found no entity of the listed types: check entities, the "
        "language and score_threshold, or leave the class out if the corpus holds none",
    }
    hint = hints.get(found.feature_class, "check the class's settings")
    raise AuditError(
        f"disclosure class {found.feature_class!r} found no rare feature in the "
        f"{records} source records, so no release can move its counts and its checks "
        f"cannot fail ({hint}; or raise max_users)"
    )


@dataclass(frozen=True)
class SemanticIndex:
    """Embeddings of the source and the release, and each source record's nearest
    release records."""

    source: np.ndarray
    release: np.ndarray
    nearest_similarity: np.ndarray  # (n_source, k), descending
    nearest_release: np.ndarray  # (n_source, k)
    search: KnnSearch  # how the nearest release records were searched


@dataclass(frozen=True)
class Embeddings:
    """Embeddings of the source and the release: of every window (``*_windows``, window
    ``j`` of record ``*_owner[j]``; a record that fits in the encoder's window, or every
    record under ``windows: first``, is one window; release windows overlap when their
    stride is below the window) and of every record (the mean of its windows,
    L2-normalised)."""

    source_windows: np.ndarray
    source_owner: np.ndarray
    release_windows: np.ndarray
    release_owner: np.ndarray
    source: np.ndarray
    release: np.ndarray
    pieces: int | None  # word pieces per window at most (None: windows: first)
    release_stride: int | None  # word pieces from one release window to the next

    @property
    def windowed(self) -> bool:
        """Whether any record has more than one window."""
        return bool(
            self.source_windows.shape[0] > self.source.shape[0]
            or self.release_windows.shape[0] > self.release.shape[0]
        )

    def summary(self) -> dict[str, Any]:
        """Window counts for the report."""
        return {
            "pieces_per_window": self.pieces,
            "release_window_stride": self.release_stride,
            "source_windows": int(self.source_windows.shape[0]),
            "release_windows": int(self.release_windows.shape[0]),
            "source_records_in_several": int(
                (np.bincount(self.source_owner, minlength=self.source.shape[0]) > 1).sum()
            ),
            "release_records_in_several": int(
                (np.bincount(self.release_owner, minlength=self.release.shape[0]) > 1).sum()
            ),
        }


def _reading(config: SemanticFeatures) -> tuple[str, float | None]:
    """How texts are read: the windows setting, and the release stride if it matters."""
    stride = config.release_window_stride if config.windows == "all" else None
    return config.windows, stride


class CountedFeatures(Protocol):
    """What a counting kernel returns (``gate.features.ngram.ngram_disclosures``,
    ``gate.features.matching.coded_disclosures``)."""

    @property
    def rare_features(self) -> int: ...
    @property
    def disclosed_features(self) -> int: ...
    @property
    def record_counts(self) -> np.ndarray: ...
    @property
    def user_counts(self) -> np.ndarray: ...
    @property
    def witness_record(self) -> np.ndarray: ...
    @property
    def witness_synthetic(self) -> np.ndarray: ...
    @property
    def rare_records(self) -> np.ndarray: ...


def counted_disclosures(
    feature_class: str,
    found: CountedFeatures,
    feature_text: Callable[[int], str],
    *,
    feature_ids: np.ndarray | None = None,
    feature_kind: Callable[[int], str] | None = None,
) -> ClassDisclosures:
    """A class whose features are counted (ngram, pii, a plug-in's codes): witness
    candidates scored by the disclosed features of their record."""
    return ClassDisclosures(
        feature_class=feature_class,
        rare_features=found.rare_features,
        disclosed_features=found.disclosed_features,
        record_counts=found.record_counts,
        user_counts=found.user_counts,
        candidates=WitnessCandidates(
            source_rows=found.witness_record,
            synthetic_rows=found.witness_synthetic,
            scores=found.record_counts[found.witness_record].astype(np.float64),
            feature_text=feature_text,
            feature_ids=feature_ids,
            feature_kind=feature_kind,
        ),
        rare_records=found.rare_records,
    )


class DisclosureClass(ABC, Generic[ClassConfigT]):
    """A kind of rare feature (``ngram``, ``pii``, ``semantic``, or a plug-in's).

    Class attributes:
        name: the value of ``class`` in a policy's ``features`` list.
        config_model: its configuration (a subclass of ``FeatureClassConfig`` whose
            ``feature_class`` is ``Literal[name]``).
    """

    name: ClassVar[str]
    config_model: ClassVar[type[FeatureClassConfig]]

    @abstractmethod
    def disclosures(
        self, bundle: Bundle, config: ClassConfigT, store: FeatureStore
    ) -> ClassDisclosures:
        """Rare features of the source, and which of them the release discloses."""


class FeatureStore:
    """Computes disclosure classes and embeddings of one bundle, once per configuration.

    Keys are the class and the JSON of its configuration, so two audits asking for the
    same class with the same settings share one computation, and different settings
    never collide.
    """

    def __init__(self, bundle: Bundle, progress: Progress, engine: Engine | None = None) -> None:
        self.bundle = bundle
        self.progress = progress
        self._engine = engine
        self._disclosures: dict[tuple[str, str], ClassDisclosures] = {}
        # a class whose computation failed fails again at once for the next audit that
        # asks (a review: the membership audit re-ran a failed Spark job, doubling the
        # time to fail)
        self._failed: dict[tuple[str, str], Exception] = {}
        self._embeddings: dict[tuple[str | None, str, str, float | None], Embeddings] = {}
        self._indexes: dict[tuple[Any, ...], SemanticIndex] = {}
        self._densities: dict[tuple[Any, ...], tuple[np.ndarray, KnnSearch]] = {}

    @property
    def engine(self) -> Engine:
        """Where the data-parallel steps run (the local engine unless the run gave one)."""
        if self._engine is None:
            from gate.engines.local import LocalEngine
            from gate.policy.models import EngineSettings

            self._engine = LocalEngine(EngineSettings())
        return self._engine

    def disclosures(self, config: FeatureClassConfig) -> ClassDisclosures:
        """Disclosures of the class ``config`` configures."""
        key = (config.feature_class, config.model_dump_json())
        if key in self._failed:
            raise self._failed[key]
        if key not in self._disclosures:
            plugin = DISCLOSURE_CLASSES.get(config.feature_class)
            if not (isinstance(plugin, type) and issubclass(plugin, DisclosureClass)):
                raise PluginUnavailableError(
                    f"disclosure class {config.feature_class!r} is registered as {plugin!r}, "
                    "which is not a gate.audits.feature_store.DisclosureClass"
                )
            try:
                self._disclosures[key] = plugin().disclosures(self.bundle, config, self)
            except Exception as exc:
                self._failed[key] = exc
                raise
        return self._disclosures[key]

    @staticmethod
    def knn(
        config: SemanticFeatures,
    ) -> Callable[[np.ndarray, np.ndarray, int], tuple[np.ndarray, np.ndarray, KnnSearch]]:
        """``search(queries, base, width)``: each query's ``width`` nearest base rows by
        inner product, searched as ``config`` says (exact or IVF, seeded)."""
        from gate.features.embeddings import knn_search

        def search(
            queries: np.ndarray, base: np.ndarray, width: int
        ) -> tuple[np.ndarray, np.ndarray, KnnSearch]:
            return knn_search(
                queries, base, k=width, method=config.knn, nprobe=config.ivf_nprobe, seed=KNN_SEED
            )

        return search

    def semantic_index(self, config: SemanticFeatures, *, k: int) -> SemanticIndex:
        """Embeddings under ``config.model`` and each source record's ``k`` nearest
        release records (recomputed only if a larger ``k`` is asked for)."""
        from gate.features.text_windows import nearest_release_records

        key = (config.model, config.precision, *_reading(config), config.knn, config.ivf_nprobe)
        cached = self._indexes.get(key)
        if cached is not None and cached.nearest_similarity.shape[1] >= min(
            k, cached.release.shape[0]
        ):
            return cached
        found = self.window_embeddings(config)
        search = self.knn(config)
        with self.progress.step("nearest release records"):
            if not found.windowed:
                sims, ids, how = search(found.source, found.release, k)
            else:
                sims, ids, how = nearest_release_records(
                    found.source_windows,
                    found.source_owner,
                    found.release_windows,
                    found.release_owner,
                    k=k,
                    search=search,
                )
        index = SemanticIndex(found.source, found.release, sims, ids, how)
        self._indexes[key] = index
        return index

    def embeddings(self, config: SemanticFeatures) -> tuple[np.ndarray, np.ndarray]:
        """One embedding per source record and per release record (:class:`Embeddings`)."""
        found = self.window_embeddings(config)
        return found.source, found.release

    def window_embeddings(self, config: SemanticFeatures) -> Embeddings:
        """Embeddings of the source and the release under ``config.model``,
        ``config.precision`` and ``config.windows`` (computed once; how neighbours are
        searched does not matter)."""
        from gate.features.embeddings import model_directory
        from gate.features.text_windows import record_vectors, text_windows, window_tokenizer

        key = (config.model, config.precision, *_reading(config))
        if key not in self._embeddings:
            source = self.bundle.source["text"].tolist()
            release = self.bundle.synthetic["text"].tolist()
            pieces = stride = None
            source_owner = np.arange(len(source), dtype=np.int64)
            release_owner = np.arange(len(release), dtype=np.int64)
            if config.windows == "all":
                tokenizer, pieces = window_tokenizer(model_directory(config.model))
                stride = max(1, round(pieces * config.release_window_stride))
                with self.progress.step("cut long texts into the encoder's windows"):
                    source_cut = text_windows(source, tokenizer=tokenizer, pieces=pieces)
                    release_cut = text_windows(
                        release, tokenizer=tokenizer, pieces=pieces, stride=stride
                    )
                source, source_owner = source_cut.texts, source_cut.owner
                release, release_owner = release_cut.texts, release_cut.owner
            # one call: a release text that repeats a source text is embedded once
            both = self.engine.encode(
                source + release,
                config=config,
                progress=self.progress,
                description="embed source and release",
            )
            source_windows, release_windows = both[: len(source)], both[len(source) :]
            n_source, n_release = len(self.bundle.source), len(self.bundle.synthetic)
            self._embeddings[key] = Embeddings(
                source_windows=source_windows,
                source_owner=source_owner,
                release_windows=release_windows,
                release_owner=release_owner,
                source=record_vectors(source_windows, source_owner, n_source),
                release=record_vectors(release_windows, release_owner, n_release),
                pieces=pieces,
                release_stride=stride,
            )
        return self._embeddings[key]

    def rare_records(self, config: SemanticFeatures) -> np.ndarray:
        """Semantic rarity: a record's mean cosine similarity to its nearest
        ``config.neighbours`` source records is in the lowest ``config.rare_quantile``
        (Phantoms and Disclosures, 2026, §4)."""

        density, _ = self.neighbour_density(config)
        return density <= np.quantile(density, config.rare_quantile)

    def neighbour_density(self, config: SemanticFeatures) -> tuple[np.ndarray, KnnSearch]:
        """Each source record's mean cosine similarity to its ``config.neighbours`` nearest
        source records, and how they were searched."""
        from gate.features.embeddings import neighbour_density

        key = (  # rarity reads the source alone: not the release's stride
            config.model,
            config.precision,
            config.windows,
            config.neighbours,
            config.knn,
            config.ivf_nprobe,
        )
        if key not in self._densities:
            source, _ = self.embeddings(config)
            # in the order of the record ids, not the bundle's (train first): an approximate
            # search trains its k-means cells on a seeded sample of positions, which must
            # not depend on which records are members
            order = np.argsort(self.bundle.record_id_rank, kind="stable")
            with self.progress.step("neighbour density of source records"):
                density, search = neighbour_density(
                    source[order],
                    neighbours=config.neighbours,
                    groups=self.bundle.user_codes[order],
                    method=config.knn,
                    nprobe=config.ivf_nprobe,
                    seed=KNN_SEED,
                )
            in_bundle_order = np.empty_like(density)
            in_bundle_order[order] = density
            self._densities[key] = (in_bundle_order, search)
        return self._densities[key]
