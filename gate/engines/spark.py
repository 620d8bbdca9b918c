"""The ``spark`` engine: the n-gram counts, PII detection and embeddings on a Spark cluster
(``local[N]``, a standalone ``spark://`` master, or Spark Connect ``sc://``).

Each partition of records is tokenised and hashed by the numpy kernels of the local
engine inside ``mapInArrow`` (no Python function per row): every ``n_min``-gram becomes a
row ``(n, h1, h2, record, offset)`` with two 64-bit polynomial hashes (independent bases)
over 64-bit token hashes keyed by a secret drawn for the run. The ``n_min``-grams are
counted first; a longer n-gram becomes a row only where all its ``n_min``-grams occur more
than once in the source (else it is unique, so rare: counted from the record lengths) or
all occur in the other corpus (else it cannot be disclosed) — the pruning of the local
engine, decided from the shortest length in one pass. Rarity, release membership and the
counts per record and per user are ``groupBy``/joins on ``(n, h1, h2)``; only the
per-record and per-user counts and one witness per record come back to the driver. The
rows are not confirmed on tokens (the local engine does): with keyed token hashes a
collision can neither be crafted nor is one expected, so both engines give the same
counts. PII detection and embeddings run in ``mapInPandas``. Bundle tables given as
datasets (directories of part files, ``hdfs://``/``s3a://``/``file://`` URIs) are listed
and fetched by Spark (``binaryFile``) and parsed by the gate's file readers.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pandas as pd

from gate.data.io import RawTable, dataset_format, dataset_table, is_uri, read_table
from gate.engines.base import Engine
from gate.errors import BundleError, EngineError
from gate.features.distinct import distinct_texts
from gate.features.ngram import (
    NgramDisclosures,
    NgramHasher,
    check_ngram_arguments,
    hash_key,
    token_hashes,
)
from gate.features.ngram_spill import text_sizes
from gate.features.tokenize import Texts, arrow_texts, tokenize
from gate.plugins import ENGINES
from gate.policy.models import EngineSettings, NgramFeatures, PiiFeatures, SemanticFeatures
from gate.progress import Progress

if TYPE_CHECKING:
    from gate.features.pii import PiiOccurrences

SECOND_BASE = 0xC2B2AE3D27D4EB4F  # odd; the base of h2, independent of h1's
SHUFFLE_CHARS = 8 << 20  # characters of text per shuffle partition (sessions the gate starts)
_KEY = ["n", "h1", "h2"]
_ROW_DTYPES = {
    "n": np.int32,
    "h1": np.int64,
    "h2": np.int64,
    "doc": np.int64,
    "offset": np.int32,
    "user": np.int64,
    "in_s": np.bool_,
}
T = TypeVar("T")
# set for the whole process when a session starts (Spark Connect marks the process as
# remote; workers run on PYSPARK_PYTHON); close() restores them
_SESSION_ENVIRON = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "PYSPARK_PYTHON")


def _hashed_batch(
    batch: Any, *, tokenizer: str, lowercase: bool, strip_punctuation: bool, key: str
) -> tuple[Any, NgramHasher, NgramHasher]:
    """Tokenise one Arrow batch's ``text`` and hash its tokens under ``key``; the corpus
    and the two n-gram hashers (bases of h1 and h2)."""
    corpus = tokenize(
        batch.column("text"),
        tokenizer=tokenizer,  # type: ignore[arg-type]
        lowercase=lowercase,
        strip_punctuation=strip_punctuation,
    )
    ids = token_hashes(corpus.vocab, key=key)[corpus.ids - 1] if corpus.ids.size else corpus.ids
    return (
        corpus,
        NgramHasher(ids, corpus.starts),
        NgramHasher(ids, corpus.starts, base=SECOND_BASE),
    )


class _RowBuffer:
    """Columns of n-gram rows ``(n, h1, h2, doc, offset[, user][, in_s])`` of one batch."""

    def __init__(self, batch: Any, corpus: Any, *, with_user: bool, with_flag: bool) -> None:
        self.corpus = corpus
        self.docs = batch.column("doc").to_numpy()
        self.users = batch.column("user").to_numpy() if with_user else None
        names = ["n", "h1", "h2", "doc", "offset"] + ["user"] * with_user + ["in_s"] * with_flag
        self.columns: dict[str, list[np.ndarray]] = {k: [] for k in names}

    def add(
        self,
        first: NgramHasher,
        second: NgramHasher,
        pos: np.ndarray,
        n: int,
        in_s: np.ndarray | None = None,
    ) -> None:
        record = first.doc[pos]
        self.columns["n"].append(np.full(pos.size, n, dtype=np.int32))
        self.columns["h1"].append(first.hashes(pos, n).view(np.int64))
        self.columns["h2"].append(second.hashes(pos, n).view(np.int64))
        self.columns["doc"].append(self.docs[record])
        self.columns["offset"].append((pos - self.corpus.starts[record]).astype(np.int32))
        if self.users is not None:
            self.columns["user"].append(self.users[record])
        if in_s is not None:
            self.columns["in_s"].append(in_s)

    def table(self) -> Any:
        import pyarrow as pa

        return pa.table(
            {
                k: np.concatenate(v) if v else np.empty(0, dtype=_ROW_DTYPES[k])
                for k, v in self.columns.items()
            }
        )


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
    rows of every n-gram, ``n_min <= n <= n_max``, that fits in its record (an Arrow
    table); token hashes under ``key`` (:func:`gate.features.ngram.hash_key`)."""
    corpus, first, second = _hashed_batch(
        batch,
        tokenizer=tokenizer,
        lowercase=lowercase,
        strip_punctuation=strip_punctuation,
        key=key,
    )
    rows = _RowBuffer(batch, corpus, with_user=with_user, with_flag=False)
    for n in range(n_min, n_max + 1):
        rows.add(first, second, first.positions(n), n)
    return rows.table()


def _all_flagged(flagged: np.ndarray, pos: np.ndarray, span: int) -> np.ndarray:
    """Whether every position of ``[p, p + span)`` is flagged, for each ``p`` in ``pos``."""
    unflagged = np.concatenate([[0], np.cumsum(~flagged)])
    return unflagged[pos + span] == unflagged[pos]


def longer_ngram_rows(
    batch: Any,
    *,
    n_min: int,
    n_max: int,
    tokenizer: str,
    lowercase: bool,
    strip_punctuation: bool,
    source: bool,
    key: str,
) -> Any:
    """The rows of the n-grams longer than ``n_min`` that can matter, from the flags of
    each record's ``n_min``-grams (column ``flags``: a list per record).

    Source records (``flags``: structs ``offset, repeated, shared``): an n-gram is hashed
    if all its ``n_min``-grams occur more than once in the source (it may be repeated;
    column ``in_s``) or all occur in the release (it may be disclosed). Release records
    (``flags``: offsets of ``n_min``-grams that occur in the source): an n-gram is hashed
    if all its ``n_min``-grams occur in the source. Both conditions depend only on the
    n-gram's tokens, so either every occurrence of an n-gram is hashed or none; an n-gram
    that is not is unique in the source (counted from the record lengths) or absent from
    the other corpus.
    """
    import pyarrow.compute as pc

    corpus, first, second = _hashed_batch(
        batch,
        tokenizer=tokenizer,
        lowercase=lowercase,
        strip_punctuation=strip_punctuation,
        key=key,
    )
    flags = batch.column("flags")
    parent = pc.list_parent_indices(flags).to_numpy()
    flat = pc.list_flatten(flags)
    total = corpus.ids.size
    repeated = np.zeros(total, dtype=bool)
    shared = np.zeros(total, dtype=bool)
    if source:
        at = corpus.starts[parent] + flat.field("offset").to_numpy()
        repeated[at[flat.field("repeated").to_numpy(zero_copy_only=False)]] = True
        shared[at[flat.field("shared").to_numpy(zero_copy_only=False)]] = True
    else:
        shared[corpus.starts[parent] + flat.to_numpy()] = True
    rows = _RowBuffer(batch, corpus, with_user=source, with_flag=source)
    for n in range(n_min + 1, n_max + 1):
        pos = first.positions(n)
        span = n - n_min + 1
        may_share = _all_flagged(shared, pos, span)
        if source:
            may_repeat = _all_flagged(repeated, pos, span)
            keep = may_repeat | may_share
            rows.add(first, second, pos[keep], n, in_s=may_repeat[keep])
        else:
            rows.add(first, second, pos[may_share], n)
    return rows.table()


def _schema(with_user: bool, with_flag: bool = False) -> str:
    user = ", user long" if with_user else ""
    flag = ", in_s boolean" if with_flag else ""
    return f"n int, h1 long, h2 long, doc long, offset int{user}{flag}"


def _first_line(exc: BaseException, limit: int = 300) -> str:
    """The first line of an error's message, at most ``limit`` characters (Spark's run
    to stack traces)."""
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _root_cause(exc: BaseException) -> str:
    """What a Java exception says went wrong: the last "Caused by:" of its stack trace (a
    Py4J error's first line is only "An error occurred while calling o51.getResult."),
    else its first line."""
    causes = [
        line.strip()[len("Caused by:") :].strip()
        for line in str(exc).splitlines()
        if line.strip().startswith("Caused by:")
    ]
    return _first_line(RuntimeError(causes[-1])) if causes else _first_line(exc)


def _answered_errors() -> tuple[type[Exception], ...]:
    """The errors of a JVM that answered (PySpark's, and Py4J's Java exceptions where the
    client has Py4J): a failed read or query, not a lost connection."""
    from pyspark.errors import PySparkException

    try:
        from py4j.protocol import Py4JJavaError
    except ImportError:  # a Spark Connect client without Py4J
        return (PySparkException,)
    return (PySparkException, Py4JJavaError)


def _lost_jvm(exc: BaseException) -> bool:
    """Py4J's errors other than a Java exception the JVM answered with, or a refused
    connection to the JVM's gateway: the JVM is gone."""
    if isinstance(exc, ConnectionError):
        return True
    if isinstance(exc, _answered_errors()):
        return False
    try:
        from py4j.protocol import Py4JError
    except ImportError:  # Spark Connect only: its errors carry their message
        return False
    return isinstance(exc, Py4JError)


# what Spark's answers say when a task or the JVM ran out of memory
_OUT_OF_MEMORY = ("SparkOutOfMemoryError", "java.lang.OutOfMemoryError", "UNABLE_TO_ACQUIRE_MEMORY")


def _out_of_memory(exc: BaseException) -> str | None:
    """The out-of-memory error a Java exception the JVM answered with names, if any."""
    if not isinstance(exc, _answered_errors()):
        return None
    text = str(exc)
    return next((marker for marker in _OUT_OF_MEMORY if marker in text), None)


def _explain_lost_jvm(step: Callable[..., T]) -> Callable[..., T]:
    """A step of :class:`SparkEngine` whose JVM connection fails (Py4J's errors: the JVM
    died, most often out of memory, with nothing but "Answer from Java side is empty"),
    or whose query failed for want of memory (a stack trace of hundreds of lines),
    raises an error that says what to change and keeps Spark's log."""

    @functools.wraps(step)
    def run(self: SparkEngine, *args: Any, **kwargs: Any) -> T:
        try:
            return step(self, *args, **kwargs)
        except Exception as exc:
            lost, memory = _lost_jvm(exc), _out_of_memory(exc)
            if not (lost or memory):
                raise
            self._failed = True
            log = f" Spark's log: {self._log}." if self._log is not None else ""
            what = (
                f"stopped answering during {step.__name__} ({type(exc).__name__}). If its "
                "JVM ran out of memory, raise"
                if lost
                else f"ran out of memory during {step.__name__} ({memory}). Raise"
            )
            raise EngineError(
                f"Spark ({self.settings.spark_master}) {what} spark.driver.memory (local[N]: "
                "the tasks run in the driver) or spark.executor.memory (a cluster) in the "
                "policy's engine.spark_conf (the gate's default driver memory is "
                f"{SESSION_DEFAULTS['spark.driver.memory']}), or split the work into more tasks "
                f"(spark.sql.shuffle.partitions).{log}"
            ) from exc

    return run


@ENGINES.register("spark")
class SparkEngine(Engine):
    """Counts on Spark; the session starts on first use and stops with the engine."""

    name = "spark"
    uses_feature_caches = False  # the workers analyse and embed every text

    def __init__(self, settings: EngineSettings) -> None:
        super().__init__(settings)
        self._session: Any = None
        self._log: Path | None = None
        self._environ: dict[str, str | None] = {}
        self._owned = False  # started here, so stopped here
        self._failed = False  # a step lost the JVM: keep Spark's log for the user

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
                try:
                    self._session.stop()
                except Exception:
                    if not self._failed:  # a lost JVM cannot stop; its error was reported
                        raise
        finally:
            for name, value in self._environ.items():  # saved before a start, failed or not
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            self._environ = {}
            self._owned = False
            self._session = None
            if self._log is not None and not self._failed:
                self._log.unlink(missing_ok=True)
            self._log = None

    def _size_shuffles(self, characters: int) -> None:
        """In a session the engine started (a Spark Connect one included: its settings
        are its own), unless ``spark_conf`` sets it: one shuffle partition per
        :data:`SHUFFLE_CHARS` characters of text, at least two per core. (Spark's default
        of 200 made the 10k benchmark 1.7–3× slower on ``local[2]`` and the bundled
        example 2.3× slower through a Connect server: every shuffle ran 200 tiny tasks; at
        one per 32 MB, 100k + 100k + 100k records ran out of execution memory on
        ``local[2]`` with 4g in 2 of 3 runs.) Sessions of others keep their settings."""
        session = self.session  # started here if no session is active
        if not self._owned or "spark.sql.shuffle.partitions" in self.settings.spark_conf:
            return
        partitions = max(2 * default_parallelism(session), -(-characters // SHUFFLE_CHARS))
        session.conf.set("spark.sql.shuffle.partitions", str(partitions))

    def read_table(self, path: str | Path) -> RawTable:
        """A local file as the local engine reads it. A dataset, a directory of part files
        or a URI the cluster can read (``hdfs://``, ``s3a://``, ``file://``, …): Spark
        lists its data files and fetches their bytes (``binaryFile``), and each is parsed
        by the gate's reader of that format, as a single file would be
        (:func:`gate.data.io.dataset_table`). A local directory is handed to Spark as a
        ``file://`` URI, so a cluster whose default file system is HDFS, or a Spark
        Connect server, reads that path, not a namesake of its own."""
        name = str(path)
        if is_uri(name):
            location = name
        elif Path(name).is_dir():
            # not Path.as_uri(): Hadoop does not decode its %20 (a space) or %25 (a %)
            location = "file://" + str(Path(name).resolve())
        else:
            return read_table(path)
        fmt = dataset_format(name)
        return dataset_table(name, self._data_files(name, location), fmt=fmt)

    @_explain_lost_jvm
    def _data_files(self, name: str, location: str) -> list[tuple[str, bytes]]:
        """``(path, bytes)`` of every data file under ``location`` (subdirectories
        included; hidden and ``_``-prefixed files left out, as Spark lists them)."""
        try:
            files = (
                self.session.read.format("binaryFile")
                .option("recursiveFileLookup", "true")
                .load(location)
                .select("path", "content")
                .toArrow()
            )
        except _answered_errors() as exc:  # a read error, not a lost JVM
            if _out_of_memory(exc):
                raise  # explained by _explain_lost_jvm
            if "maxResultSize" in str(exc):
                raise BundleError(
                    f"{name}: the dataset's files are larger than the session's "
                    "spark.driver.maxResultSize; raise it in the policy's engine.spark_conf "
                    "(0: no limit, the default of sessions the gate starts)"
                ) from None
            raise BundleError(
                f"{name}: Spark cannot read the dataset: {_root_cause(exc)}"
            ) from None
        return list(
            zip(files.column("path").to_pylist(), files.column("content").to_pylist(), strict=True)
        )

    def _frame(self, frame: pd.DataFrame) -> Any:
        df = self.session.createDataFrame(frame)
        partitions = self.settings.spark_partitions
        return df.repartition(partitions) if partitions else df

    def _records(self, texts: Texts, **columns: np.ndarray) -> Any:
        """The texts as a DataFrame ``(doc, *columns, text)``. The texts go to Spark as
        Arrow strings, without a Python string per text."""
        column = arrow_texts(texts)
        return self._frame(
            pd.DataFrame(
                {
                    "doc": np.arange(len(column), dtype=np.int64),
                    **columns,
                    "text": pd.Series(pd.array(column, dtype="str")),
                }
            )
        )

    @_explain_lost_jvm
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
        so ``processes`` is 1 there (and no detection cache on the workers)."""
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

    @_explain_lost_jvm
    def encode(
        self,
        texts: Sequence[str],
        *,
        config: SemanticFeatures,
        progress: Progress,
        description: str,
    ) -> np.ndarray:
        """The encoder in ``mapInPandas``: each Python worker loads it once and embeds its
        partitions (no on-disk cache on the workers); identical texts are sent once."""
        if len(texts) == 0:
            return super().encode(texts, config=config, progress=progress, description=description)
        codes, unique = distinct_texts(texts)
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
                self._records(unique)
                .mapInPandas(mapper, "doc long, embedding array<float>")
                .toPandas()
                .sort_values("doc")
            )
        if not np.array_equal(rows["doc"].to_numpy(), np.arange(len(unique))):  # no shifted row
            raise EngineError(
                f"spark returned {len(rows)} embeddings for {len(unique)} distinct texts"
            )
        return np.stack(rows["embedding"].to_numpy()).astype(np.float32)[codes]

    @_explain_lost_jvm
    def ngram_disclosures(
        self,
        source_texts: Texts,
        synthetic_texts: Texts,
        *,
        users: np.ndarray,
        config: NgramFeatures,
        progress: Progress,
    ) -> NgramDisclosures:
        from pyspark.sql import functions as F
        from pyspark.storagelevel import StorageLevel

        source_texts, synthetic_texts = arrow_texts(source_texts), arrow_texts(synthetic_texts)
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
            **config.tokenizer_options(),
            "key": hash_key(),  # secret, one per run: collisions cannot be crafted
        }

        def mapper(make: Any, **fixed: Any) -> Any:
            def run(batches: Iterator[Any]) -> Iterator[Any]:
                for batch in batches:
                    yield from make(batch, **options, **fixed).to_batches()

            return run

        cached: list[Any] = []

        def cache(frame: Any) -> Any:
            cached.append(frame.persist(StorageLevel.MEMORY_AND_DISK))
            return cached[-1]

        n_min = config.n_min
        shortest = {"n_min": n_min, "n_max": n_min}
        self._size_shuffles(int(text_sizes(source_texts).sum() + text_sizes(synthetic_texts).sum()))
        try:
            with progress.step(f"spark ({self.settings.spark_master}): {n_min}-grams"):
                source_records = cache(self._records(source_texts, user=users))
                release_records = cache(self._records(synthetic_texts))
                source_short = cache(
                    source_records.mapInArrow(
                        mapper(ngram_rows, with_user=True, **shortest), _schema(True)
                    )
                )
                release_short = cache(
                    release_records.mapInArrow(
                        mapper(ngram_rows, with_user=False, **shortest), _schema(False)
                    )
                )
                lengths = source_short.groupBy("doc").agg(F.max("offset").alias("last"))
                last_offsets = lengths.toPandas()["last"].to_numpy(dtype=np.int64)
            with progress.step(f"spark: longer n-grams where the {n_min}-grams allow them"):
                occurrences = source_short.groupBy(*_KEY).agg(F.count(F.lit(1)).alias("occ"))
                in_release = (
                    release_short.select(*_KEY).distinct().withColumn("shared", F.lit(True))
                )
                flags = (
                    source_short.join(occurrences, on=_KEY)
                    .join(in_release, on=_KEY, how="left")
                    .select(
                        "doc",
                        "offset",
                        (F.col("occ") > 1).alias("repeated"),
                        F.coalesce(F.col("shared"), F.lit(False)).alias("shared"),
                    )
                    .where(F.col("repeated") | F.col("shared"))
                    .groupBy("doc")
                    .agg(F.collect_list(F.struct("offset", "repeated", "shared")).alias("flags"))
                )
                source_long = source_records.join(flags, on="doc").mapInArrow(
                    mapper(longer_ngram_rows, source=True, n_min=n_min, n_max=config.n_max),
                    _schema(True, with_flag=True),
                )
                release_flags = (
                    release_short.join(occurrences.select(*_KEY), on=_KEY)
                    .groupBy("doc")
                    .agg(F.collect_list("offset").alias("flags"))
                )
                release_long = release_records.join(release_flags, on="doc").mapInArrow(
                    mapper(longer_ngram_rows, source=False, n_min=n_min, n_max=config.n_max),
                    _schema(False),
                )
                source = cache(
                    source_short.withColumn("in_s", F.lit(True)).unionByName(source_long)
                )
                release = release_short.unionByName(release_long)
                hashed = (
                    source.where(F.col("in_s") & (F.col("n") > n_min)).groupBy("n").count()
                ).toPandas()
            with progress.step("spark: rarity and release membership"):
                rare = cache(
                    source.groupBy(*_KEY)
                    .agg(
                        F.countDistinct("user").alias("holders"),
                        F.max("in_s").alias("in_s"),
                    )
                    .where(F.col("holders") <= config.max_users)
                    .select(*_KEY, "in_s")
                )
                rare_features = rare.where("in_s").count() + _unique_longer(
                    last_offsets, hashed, n_min=n_min, n_max=config.n_max
                )
                # the first release occurrence of each n-gram (smallest record, then offset)
                first_release = release.groupBy(*_KEY).agg(
                    F.min(F.struct("doc", "offset")).getField("doc").alias("release_doc")
                )
                disclosed = cache(rare.select(*_KEY).join(first_release, on=_KEY))
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
            failing = sys.exc_info()[1] is not None
            for frame in cached:
                try:
                    frame.unpersist()
                except Exception:
                    if not failing:  # else the step's own error is the one to report
                        raise
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


def _unique_longer(
    last_offsets: np.ndarray, hashed: pd.DataFrame, *, n_min: int, n_max: int
) -> int:
    """The n-grams longer than ``n_min`` that were not hashed because one of their
    ``n_min``-grams occurs once in the source: each occurs once, so each is rare. Per
    length n, the positions where an n-gram fits (from each record's last ``n_min``-gram
    offset) minus those hashed as possibly repeated."""
    tokens = last_offsets + n_min
    hashed_per_length = dict(zip(hashed["n"].astype(int), hashed["count"].astype(int), strict=True))
    return sum(
        int(np.maximum(tokens - n + 1, 0).sum()) - hashed_per_length.get(n, 0)
        for n in range(n_min + 1, n_max + 1)
    )


SESSION_DEFAULTS = {
    "spark.driver.memory": "4g",  # local[N] runs the tasks in the driver
    # the driver fetches the datasets' files and the embeddings (3 GB at 1M + 1M + 1M
    # records); its memory is the limit that matters, and its error names it
    "spark.driver.maxResultSize": "0",
}


def default_parallelism(session: Any) -> int:
    """The cores a session's queries run on (Spark's default parallelism). A Spark
    Connect session has no SparkContext to ask: a range without a partition count is
    split into that many partitions (or ``spark.sql.leafNodeDefaultParallelism``, where
    set), so one small query counts them."""
    if not type(session).__module__.startswith("pyspark.sql.connect"):
        return int(session.sparkContext.defaultParallelism)
    from pyspark.sql import functions as F

    spread = session.range(0, 1 << 16).select(F.spark_partition_id().alias("p"))
    return int(spread.agg(F.countDistinct("p")).first()[0])


def _refused_setting(exc: Exception) -> bool:
    """Spark's answer to setting a static or server setting in a session."""
    condition = exc.getCondition() if hasattr(exc, "getCondition") else None
    return condition == "CANNOT_MODIFY_CONFIG" or "Cannot modify the value of" in str(exc)


def start_session(master: str, conf: Mapping[str, str]) -> tuple[Any, Path | None]:
    """A Spark session on ``master`` (``sc://`` = Spark Connect), quiet: no UI or console
    progress bars, Spark's log at ERROR, and the JVM's own output (start-up notices, its
    log) in a log file instead of the user's terminal. Returns the session and the log."""
    from pyspark.sql import SparkSession

    if master.startswith("sc://"):
        # a session of its own (getOrCreate would hand back the process's default one,
        # a caller's); the server's settings (its memory) are set where it starts, a
        # session's (SQL ones) are this session's alone
        session = SparkSession.builder.remote(master).create()
        for key, value in conf.items():
            try:
                session.conf.set(key, value)
            except Exception as exc:
                session.stop()
                if not _refused_setting(exc):
                    raise
                raise EngineError(
                    f"the policy's engine.spark_conf sets {key!r}, which a Spark Connect "
                    f"session cannot change ({type(exc).__name__}: {_first_line(exc)}); set "
                    f"it where the Connect server at {master} is started, and keep in "
                    "spark_conf only settings a session may change (such as spark.sql.*)"
                ) from exc
        return session, None
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
    received: list[int] = []
    with tempfile.NamedTemporaryFile(prefix="gate-spark-", suffix=".log", delete=False) as log:
        saved = os.dup(2)
        try:
            os.dup2(log.fileno(), 2)  # the JVM, started now, inherits this stderr
            with _signals_deferred(received):
                session = builder.getOrCreate()
        except Exception as exc:
            _deliver(received)  # a signal that came during a failed start comes first
            raise EngineError(
                f"Spark did not start on master {master!r}: {type(exc).__name__}: {exc} "
                f"(Spark's log: {log.name})"
            ) from exc
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    if received:
        # stopped before the signal's handler runs: an interrupted launch orphaned a JVM
        session.stop()
        Path(log.name).unlink(missing_ok=True)
        _deliver(received)
        raise EngineError(f"Spark's start was interrupted by signal {received[0]}")
    session.sparkContext.setLogLevel("ERROR")
    return session, Path(log.name)


def _deliver(received: list[int]) -> None:
    """Raise the first signal noted again, now that its handler may act on it."""
    if received:
        signal.raise_signal(received[0])


@contextlib.contextmanager
def _signals_deferred(received: list[int]) -> Iterator[None]:
    """SIGTERM and SIGINT are noted in ``received``, not acted on, while the JVM starts:
    an exception raised inside PySpark's launcher left the JVM running without its parent
    (a reviewer saw it after a SIGTERM 1.6 s into the start). The caller stops the session
    and delivers the signal. A second signal is acted on at once (a start that hangs, a
    YARN queue that is full, can still be interrupted). Python handlers, unlike blocked
    signals, are not inherited by the JVM. A signal ignored or handled outside Python is
    left as it is; outside the main thread nothing changes (only it may set handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {
        s: handler
        for s in (signal.SIGTERM, signal.SIGINT)
        if (handler := signal.getsignal(s)) is not None and handler is not signal.SIG_IGN
    }

    def restore() -> None:
        for s, handler in previous.items():
            signal.signal(s, handler)

    def note(signum: int, frame: object) -> None:
        received.append(signum)
        if len(received) > 1:
            restore()
            signal.raise_signal(signum)

    for s in previous:
        signal.signal(s, note)
    try:
        yield
    finally:
        restore()
