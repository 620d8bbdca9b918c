"""The ``spark`` engine: the n-gram counts, PII detection and embeddings on a Spark cluster
(``local[N]``, a standalone ``spark://`` master, or Spark Connect ``sc://``).

Each partition of records is tokenised and hashed by the numpy kernels of the local
engine inside ``mapInArrow`` (no Python function per row): every n-gram that fits in its
record becomes a row ``(n, h1, h2, record, offset)`` with two 64-bit polynomial hashes
(independent bases) over 64-bit token hashes keyed by a secret drawn for the run.
Rarity, release membership and the counts per record and per user are
``groupBy``/joins on ``(n, h1, h2)``; only the per-record and per-user counts and one
witness per record come back to the driver. The rows are not confirmed on tokens (the
local engine does): with keyed token hashes a collision can neither be crafted nor is one
expected, so both engines give the same counts. PII detection and embeddings run in
``mapInPandas``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from gate.engines.base import Engine
from gate.features.ngram import NgramDisclosures, NgramHasher, check_ngram_arguments
from gate.features.ngram_spill import hash_key, token_hashes
from gate.features.tokenize import tokenize
from gate.plugins import ENGINES
from gate.policy.models import EngineSettings, NgramFeatures, PiiFeatures, SemanticFeatures
from gate.progress import Progress

if TYPE_CHECKING:
    from gate.features.pii import PiiOccurrences

SECOND_BASE = 0xC2B2AE3D27D4EB4F  # odd; the base of h2, independent of h1's
_KEY = ["n", "h1", "h2"]
# set for the whole process when a session starts (Spark Connect marks the process as
# remote; workers run on PYSPARK_PYTHON); close() restores them
_SESSION_ENVIRON = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "PYSPARK_PYTHON")


def ngram_rows(
    batch: Any,
    *,
    n_min: int,
    n_max: int,
    tokenizer: str,
    lowercase: bool,
    strip_punctuation: bool,
    with_user: bool,
    key: str,
) -> Any:
    """One Arrow record batch of records (``doc``, ``text`` and maybe ``user``) to the
    rows of every n-gram that fits in its record (an Arrow table); token hashes under
    ``key`` (:func:`gate.features.ngram_spill.hash_key`)."""
    import pyarrow as pa

    corpus = tokenize(
        batch.column("text"),
        tokenizer=tokenizer,  # type: ignore[arg-type]
        lowercase=lowercase,
        strip_punctuation=strip_punctuation,
    )
    ids = token_hashes(corpus.vocab, key=key)[corpus.ids - 1] if corpus.ids.size else corpus.ids
    first, second = (
        NgramHasher(ids, corpus.starts),
        NgramHasher(ids, corpus.starts, base=SECOND_BASE),
    )
    docs = batch.column("doc").to_numpy()
    users = batch.column("user").to_numpy() if with_user else None
    columns: dict[str, list[np.ndarray]] = {k: [] for k in ("n", "h1", "h2", "doc", "offset")}
    if with_user:
        columns["user"] = []
    for n in range(n_min, n_max + 1):
        pos = first.positions(n)
        record = first.doc[pos]
        columns["n"].append(np.full(pos.size, n, dtype=np.int32))
        columns["h1"].append(first.hashes(pos, n).view(np.int64))
        columns["h2"].append(second.hashes(pos, n).view(np.int64))
        columns["doc"].append(docs[record])
        columns["offset"].append((pos - corpus.starts[record]).astype(np.int32))
        if users is not None:
            columns["user"].append(users[record])
    return pa.table({k: np.concatenate(v) for k, v in columns.items()})


def _schema(with_user: bool) -> str:
    user = ", user long" if with_user else ""
    return f"n int, h1 long, h2 long, doc long, offset int{user}"


@ENGINES.register("spark")
class SparkEngine(Engine):
    """Counts on Spark; the session starts on first use and stops with the engine."""

    name = "spark"

    def __init__(self, settings: EngineSettings) -> None:
        super().__init__(settings)
        self._session: Any = None
        self._log: Path | None = None
        self._environ: dict[str, str | None] = {}
        self._owned = False  # started here, so stopped here

    @property
    def session(self) -> Any:
        """The process's active Spark session if it has one (a notebook's, a caller's:
        used, never stopped), else a new one on ``spark_master``."""
        if self._session is None:
            from pyspark.sql import SparkSession

            active: Any
            if self.settings.spark_master.startswith("sc://"):
                from pyspark.sql.connect.session import SparkSession as RemoteSession

                active = RemoteSession.getActiveSession()
            else:
                active = SparkSession.getActiveSession()
            if active is not None:
                self._session = active
                return active
            self._environ = {name: os.environ.get(name) for name in _SESSION_ENVIRON}
            self._session, self._log = start_session(
                self.settings.spark_master, self.settings.spark_conf
            )
            self._owned = True
        return self._session

    def close(self) -> None:
        try:
            if self._session is not None and self._owned:
                self._session.stop()
        finally:
            if self._owned:
                for name, value in self._environ.items():
                    if value is None:
                        os.environ.pop(name, None)
                    else:
                        os.environ[name] = value
            self._owned = False
            self._session = None
            if self._log is not None:
                self._log.unlink(missing_ok=True)
                self._log = None

    def _frame(self, frame: pd.DataFrame) -> Any:
        df = self.session.createDataFrame(frame)
        partitions = self.settings.spark_partitions
        return df.repartition(partitions) if partitions else df

    def _records(self, texts: Sequence[str]) -> Any:
        """The texts as a DataFrame ``(doc, text)``."""
        return self._frame(
            pd.DataFrame(
                {
                    "doc": np.arange(len(texts), dtype=np.int64),
                    "text": pd.Series(list(texts), dtype=object).astype(str),
                }
            )
        )

    def detect_pii(
        self,
        texts: Sequence[str],
        *,
        config: PiiFeatures,
        progress: Progress,
        description: str,
    ) -> PiiOccurrences:
        """Presidio in ``mapInPandas``: each Python worker builds its analyzer once (the
        workers are reused) and analyses its partitions; Spark's tasks are the parallelism,
        so ``processes`` is 1 there."""
        from gate.features.pii import PiiOccurrences

        options: dict[str, Any] = {
            "engine": config.engine,
            "spacy_model": config.spacy_model,
            "entities": tuple(config.entities),
            "score_threshold": config.score_threshold,
            "normalize": config.normalize,
        }

        def mapper(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
            from gate.features.pii import detect_pii

            for frame in frames:
                found = detect_pii(frame["text"].tolist(), processes=1, **options)
                yield pd.DataFrame(
                    {
                        "doc": frame["doc"].to_numpy()[found.docs],
                        "entity_type": pd.Series(found.entity_types, dtype=object),
                        "raw": pd.Series(found.raw, dtype=object),
                        "value": pd.Series(found.values, dtype=object),
                    }
                )

        with progress.step(f"spark ({self.settings.spark_master}): {description}"):
            rows = (
                self._records(texts)
                .mapInPandas(mapper, "doc long, entity_type string, raw string, value string")
                .toPandas()
            )
        rows = rows.sort_values("doc", kind="stable")  # each record's rows keep their order
        return PiiOccurrences(
            docs=rows["doc"].to_numpy(dtype=np.int64),
            entity_types=[str(v) for v in rows["entity_type"]],
            raw=[str(v) for v in rows["raw"]],
            values=[str(v) for v in rows["value"]],
        )

    def encode(
        self,
        texts: Sequence[str],
        *,
        config: SemanticFeatures,
        progress: Progress,
        description: str,
    ) -> np.ndarray:
        """The encoder in ``mapInPandas``: each Python worker loads it once and embeds its
        partitions (no on-disk cache on the workers)."""
        if len(texts) == 0:
            return super().encode(texts, config=config, progress=progress, description=description)
        model, batch_size, precision = config.model, config.batch_size, config.precision

        def mapper(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
            from gate.features.embeddings import encode

            for frame in frames:
                vectors = encode(
                    frame["text"].tolist(),
                    model=model,
                    batch_size=batch_size,
                    precision=precision,
                )
                yield pd.DataFrame({"doc": frame["doc"].to_numpy(), "embedding": list(vectors)})

        with progress.step(f"spark ({self.settings.spark_master}): {description}"):
            rows = (
                self._records(texts)
                .mapInPandas(mapper, "doc long, embedding array<float>")
                .toPandas()
                .sort_values("doc")
            )
        return np.stack(rows["embedding"].to_numpy()).astype(np.float32)

    def ngram_disclosures(
        self,
        source_texts: Sequence[str],
        synthetic_texts: Sequence[str],
        *,
        users: np.ndarray,
        config: NgramFeatures,
        progress: Progress,
    ) -> NgramDisclosures:
        from pyspark.sql import functions as F
        from pyspark.storagelevel import StorageLevel

        users = check_ngram_arguments(
            n_records=len(source_texts),
            users=users,
            n_min=config.n_min,
            n_max=config.n_max,
            max_users=config.max_users,
        )
        n_records = len(source_texts)
        n_users = int(users.max()) + 1 if users.size else 0
        options: dict[str, Any] = {
            "n_min": config.n_min,
            "n_max": config.n_max,
            **config.tokenizer_options(),
            "key": hash_key(),  # secret, one per run: collisions cannot be crafted
        }

        def rows(with_user: bool) -> Any:
            def mapper(batches: Iterator[Any]) -> Iterator[Any]:
                for batch in batches:
                    yield from ngram_rows(batch, with_user=with_user, **options).to_batches()

            return mapper

        cached: list[Any] = []

        def cache(frame: Any) -> Any:
            cached.append(frame.persist(StorageLevel.MEMORY_AND_DISK))
            return cached[-1]

        try:
            with progress.step(f"spark ({self.settings.spark_master}): n-grams of the records"):
                source = self._frame(
                    pd.DataFrame(
                        {
                            "doc": np.arange(n_records, dtype=np.int64),
                            "user": users,
                            "text": pd.Series(source_texts, dtype=object).astype(str),
                        }
                    )
                ).mapInArrow(rows(True), _schema(True))
                release = self._frame(
                    pd.DataFrame(
                        {
                            "doc": np.arange(len(synthetic_texts), dtype=np.int64),
                            "text": pd.Series(synthetic_texts, dtype=object).astype(str),
                        }
                    )
                ).mapInArrow(rows(False), _schema(False))
                source = cache(source)
            with progress.step("spark: rarity and release membership"):
                rare = (
                    source.groupBy(*_KEY)
                    .agg(F.countDistinct("user").alias("holders"))
                    .where(F.col("holders") <= config.max_users)
                    .select(*_KEY)
                )
                rare = cache(rare)
                rare_features = rare.count()
                # the first release occurrence of each n-gram (smallest record, then offset)
                first_release = release.groupBy(*_KEY).agg(
                    F.min(F.struct("doc", "offset")).getField("doc").alias("release_doc")
                )
                disclosed = cache(rare.join(first_release, on=_KEY))
                disclosed_features = disclosed.count()
            with progress.step("spark: disclosures per record and per user"):
                hits = cache(source.join(disclosed, on=_KEY))
                per_record = hits.select("doc", *_KEY).distinct().groupBy("doc").count().toPandas()
                per_user = hits.select("user", *_KEY).distinct().groupBy("user").count().toPandas()
                best = F.max(F.struct("n", (-F.col("offset")).alias("first"), "release_doc")).alias(
                    "best"
                )
                witness = (
                    hits.groupBy("doc")
                    .agg(best)
                    .select(
                        "doc",
                        F.col("best.n").alias("n"),
                        (-F.col("best.first")).alias("offset"),
                        F.col("best.release_doc").alias("release_doc"),
                    )
                    .toPandas()
                    .sort_values("doc")
                )
        finally:  # the session may be the caller's: leave nothing cached in it
            for frame in cached:
                frame.unpersist()
        record_counts = np.zeros(n_records, dtype=np.int64)
        record_counts[per_record["doc"].to_numpy()] = per_record["count"].to_numpy()
        user_counts = np.zeros(n_users, dtype=np.int64)
        user_counts[per_user["user"].to_numpy()] = per_user["count"].to_numpy()
        return NgramDisclosures(
            rare_features=int(rare_features),
            disclosed_features=int(disclosed_features),
            record_counts=record_counts,
            user_counts=user_counts,
            witness_record=witness["doc"].to_numpy(dtype=np.int64),
            witness_offset=witness["offset"].to_numpy(dtype=np.int64),
            witness_length=witness["n"].to_numpy(dtype=np.int64),
            witness_synthetic=witness["release_doc"].to_numpy(dtype=np.int64),
        )


SESSION_DEFAULTS = {"spark.driver.memory": "4g"}  # local[N] runs the tasks in the driver


def start_session(master: str, conf: Mapping[str, str]) -> tuple[Any, Path | None]:
    """A Spark session on ``master`` (``sc://`` = Spark Connect), quiet: no UI or console
    progress bars, Spark's log at ERROR, and the JVM's own output (start-up notices, its
    log) in a log file instead of the user's terminal. Returns the session and the log."""
    from pyspark.sql import SparkSession

    if master.startswith("sc://"):
        return SparkSession.builder.remote(master).getOrCreate(), None
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName("gate")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    for key, value in {**SESSION_DEFAULTS, **conf}.items():
        builder = builder.config(key, value)
    with tempfile.NamedTemporaryFile(prefix="gate-spark-", suffix=".log", delete=False) as log:
        saved = os.dup(2)
        try:
            os.dup2(log.fileno(), 2)  # the JVM, started now, inherits this stderr
            session = builder.getOrCreate()
        except Exception as exc:
            raise RuntimeError(
                f"Spark did not start on master {master!r}: {type(exc).__name__}: {exc} "
                f"(Spark's log: {log.name})"
            ) from exc
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    session.sparkContext.setLogLevel("ERROR")
    return session, Path(log.name)
