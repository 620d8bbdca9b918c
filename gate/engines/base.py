"""The engine seam: the steps whose cost grows with the corpus (tokenise and hash, rarity
counts, release membership of features, per-record and per-user disclosure counts, PII
detection and embedding per record) behind one interface, so that the same audit runs in
this process or on a cluster with the same answers."""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from gate.data.io import RawTable, read_table
from gate.features.ngram import NgramDisclosures
from gate.features.tokenize import Texts
from gate.plugins import ENGINES
from gate.policy.models import EngineSettings, NgramFeatures, PiiFeatures, SemanticFeatures
from gate.progress import Progress
from gate.registry import PluginUnavailableError

if TYPE_CHECKING:
    from gate.features.pii import PiiOccurrences


class Engine(ABC):
    """Runs the data-parallel steps of the disclosure classes.

    Class attributes:
        name: the value of ``engine.name`` in a policy (and of ``--engine``).
        uses_feature_caches: whether the engine reads and writes the ``cache_dir`` of the
            ``pii`` and ``semantic`` classes.

    An engine may hold resources (a Spark session): use it as a context manager.
    """

    name: ClassVar[str]
    uses_feature_caches: ClassVar[bool] = True

    def __init__(self, settings: EngineSettings) -> None:
        self.settings = settings

    @abstractmethod
    def ngram_disclosures(
        self,
        source_texts: Texts,
        synthetic_texts: Texts,
        *,
        users: np.ndarray,
        config: NgramFeatures,
        progress: Progress,
    ) -> NgramDisclosures:
        """Rare n-grams of the source texts and their disclosure in the release, as
        :func:`gate.features.ngram.ngram_disclosures` counts them (same counts, same
        witnesses, on every engine). The texts come as Python strings or as an Arrow
        column of strings (the audit passes the bundle's columns as Arrow, uncopied:
        :func:`gate.features.tokenize.arrow_texts` takes either)."""

    def detect_pii(
        self,
        texts: Sequence[str],
        *,
        config: PiiFeatures,
        progress: Progress,
        description: str,
    ) -> PiiOccurrences:
        """Presidio's entities in every text, as :func:`gate.features.pii.detect_pii`
        finds them (by default in this process, with its worker processes and the class's
        detection cache)."""
        from gate.features.pii import detect_pii

        return detect_pii(
            texts,
            engine=config.engine,
            spacy_model=config.spacy_model,
            entities=config.entities,
            score_threshold=config.score_threshold,
            normalize=config.normalize,
            processes=config.processes,
            cache_dir=config.cache_dir,
            progress=progress,
            description=description,
        )

    def encode(
        self,
        texts: Sequence[str],
        *,
        config: SemanticFeatures,
        progress: Progress,
        description: str,
    ) -> np.ndarray:
        """Embeddings of every text, as :func:`gate.features.embeddings.encode` computes
        them (by default in this process)."""
        from gate.features.embeddings import encode

        return encode(
            texts,
            model=config.model,
            batch_size=config.batch_size,
            precision=config.precision,
            cache_dir=config.cache_dir,
            progress=progress,
            description=description,
        )

    def read_table(self, path: str | Path) -> RawTable:
        """One table of a bundle (:func:`gate.data.io.read_table`: a local file). Engines
        that run on a cluster may also read datasets there."""
        return read_table(path)

    def close(self) -> None:  # noqa: B027 (optional hook: most engines hold nothing)
        """Release what the engine holds."""

    def __enter__(self) -> Engine:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if kind is None:
            self.close()
            return
        # the error or interruption in flight is the one reported: a close that fails
        # (a Spark JVM's connection left out of step by a signal) must not replace it
        with contextlib.suppress(Exception):
            self.close()


def uses_feature_caches(settings: EngineSettings) -> bool:
    """Whether the engine ``settings.name`` names uses the feature classes' caches.

    Raises:
        PluginUnavailableError: no such engine, or its dependencies are not installed.
    """
    return bool(getattr(ENGINES.get(settings.name), "uses_feature_caches", True))


def create_engine(settings: EngineSettings) -> Engine:
    """The engine ``settings.name`` names, configured by ``settings``.

    Raises:
        PluginUnavailableError: no such engine, or its dependencies are not installed.
    """
    plugin = ENGINES.get(settings.name)
    if not (isinstance(plugin, type) and issubclass(plugin, Engine)):
        raise PluginUnavailableError(
            f"engine {settings.name!r} is registered as {plugin!r}, which is not a "
            "gate.engines.base.Engine"
        )
    return plugin(settings)
