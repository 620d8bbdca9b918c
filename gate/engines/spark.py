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

import functools
import logging
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote

import numpy as np
import pandas as pd

from gate.data.io import (
    RawTable,
    dataset_format,
    dataset_table,
    is_uri,
    local_dataset_directory,
    local_listing,
    read_table,
    refuse_broken_links,
    refuse_unfinished_dataset,
)
from gate.engines.base import Engine
from gate.engines.spark_rows import longer_ngram_rows, ngram_rows, row_schema
from gate.engines.spark_session import (
    SESSION_DEFAULTS,
    SESSION_ENVIRON,
    Py4JRecordsToLog,
    answered_errors,
    default_parallelism,
    lost_jvm,
    out_of_memory,
    process_session,
    python_worker_died,
    root_cause,
    run_cancellable,
    start_session,
)
from gate.errors import BundleError, EngineError
from gate.features.distinct import distinct_texts
from gate.features.ngram import NgramDisclosures, check_ngram_arguments, hash_key
from gate.features.ngram_spill import text_sizes
from gate.features.tokenize import Texts, arrow_texts
from gate.interrupts import raise_if_interrupted
from gate.plugins import ENGINES
from gate.policy.models import EngineSettings, NgramFeatures, PiiFeatures, SemanticFeatures
from gate.progress import Progress

if TYPE_CHECKING:
    from gate.features.pii import PiiOccurrences

_PROBED_FOLDERS = 64  # folders of a dataset probed for a commit marker at once (Connect)
SHUFFLE_CHARS = 8 << 20  # characters of text per shuffle partition (sessions the gate starts)
_KEY = ["n", "h1", "h2"]
T = TypeVar("T")


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
            lost, memory = lost_jvm(exc), out_of_memory(exc)
            log = f" Spark's log: {self._log}." if self._log is not None else ""
            if not (lost or memory) and python_worker_died(exc):
                raise EngineError(
                    f"Spark ({self.settings.spark_master}): a Python worker running a task "
                    f"of {step.__name__} died (it crashed, or was killed from outside: by the "
                    "system's out-of-memory killer when memory ran short; the PII and "
                    f"embedding models are loaded in every worker).{log}"
                ) from exc
            if not (lost or memory):
                raise
            self._failed = True
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


def _cancellable(step: Callable[..., T]) -> Callable[..., T]:
    """A step of :class:`SparkEngine` whose queries a Ctrl-C or SIGTERM cancels at once
    (:func:`run_cancellable`); the session starts first, in the calling thread, where
    the signals of its start can be deferred."""

    @functools.wraps(step)
    def run(self: SparkEngine, *args: Any, **kwargs: Any) -> T:
        return run_cancellable(self.session, lambda: step(self, *args, **kwargs))

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
        self._start_error: EngineError | None = None  # each later step says it again
        self._local_dir: Path | None = None  # the session's shuffle and spill files
        self._py4j_records: Py4JRecordsToLog | None = None

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
                active = SparkSession.getActiveSession() or process_session()
            if active is not None:
                self._session = active
                return active
            if self._start_error is not None:
                raise self._start_error
            if not self._environ:  # the user's, not what an interrupted start left set
                self._environ = {name: os.environ.get(name) for name in SESSION_ENVIRON}
            conf = dict(self.settings.spark_conf)
            # local[N]: the tasks, and their shuffle files, are this process's JVM's (a
            # cluster's executors write where their cluster manager tells them)
            if self.settings.spark_master.startswith("local") and not (
                "spark.local.dir" in conf or os.environ.get("SPARK_LOCAL_DIRS")
            ):
                self._local_dir = Path(tempfile.mkdtemp(prefix="gate-spark-local-"))  # 0700
                conf["spark.local.dir"] = str(self._local_dir)
            try:
                self._session, self._log = start_session(self.settings.spark_master, conf)
            except EngineError as exc:
                self._start_error = exc
                raise
            self._owned = True
            if self._log is not None:
                self._py4j_records = Py4JRecordsToLog(self._log)
                # first: the CLI's filter (gate.quiet) drops Py4J's records the log keeps
                logging.getLogger().filters.insert(0, self._py4j_records)
        return self._session

    def close(self) -> None:
        """Stop a session started here, put the environment back, and remove the
        session's local directory (shuffle files hold texts: left behind by a JVM that
        died, they would be private records in a temporary directory) and, unless a step
        lost the JVM, its log."""
        try:
            if self._session is not None and self._owned:
                try:
                    self._session.stop()
                except Exception:
                    if not self._failed:  # a lost JVM cannot stop; its error was reported
                        raise
        finally:
            if self._local_dir is not None:
                shutil.rmtree(self._local_dir, ignore_errors=True)
                self._local_dir = None
            for name, value in self._environ.items():  # saved before a start, failed or not
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            self._environ = {}
            self._owned = False
            self._session = None
            if self._py4j_records is not None:  # after the stop: a lost JVM's is logged too
                logging.getLogger().removeFilter(self._py4j_records)
                self._py4j_records = None
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
        Connect server, reads that path, not a namesake of its own. A local dataset
        with a data file that is a broken symbolic link is refused (Spark's listing would
        leave it out)."""
        name = str(path)
        if is_uri(name):
            location = name
        elif Path(name).is_dir():
            # not Path.as_uri(): Hadoop does not decode its %20 (a space) or %25 (a %)
            location = "file://" + str(Path(name).resolve())
        else:
            return read_table(path)
        directory = local_dataset_directory(name)
        if directory is not None:  # one walk of a local dataset serves both checks
            listing = local_listing(directory)
            refuse_broken_links(name, directory, listing)
        else:
            listing = self._listing(name, location)
        fmt = dataset_format(name)
        refuse_unfinished_dataset(name, listing)  # before the files' bytes come
        return dataset_table(name, self._data_files(name, location), fmt=fmt)

    @_explain_lost_jvm
    @_cancellable
    def _listing(self, name: str, location: str) -> list[str]:
        """Every file below ``location`` relative to it, hidden ones included, listed by
        Hadoop's file system in the gate's JVM; through Spark Connect, whose client has no
        JVM, what :meth:`_probed_listing` finds."""
        if self.settings.spark_master.startswith("sc://"):
            return self._probed_listing(name, location)
        context = self.session.sparkContext
        root = context._jvm.org.apache.hadoop.fs.Path(location)
        try:
            system = root.getFileSystem(context._jsc.hadoopConfiguration())
            prefix = str(system.makeQualified(root).toString()).rstrip("/") + "/"
            found = []
            files = system.listFiles(root, True)
            while files.hasNext():
                path = str(files.next().getPath().toString())
                found.append(path.removeprefix(prefix))
        except answered_errors() as exc:  # a listing error, not a lost JVM
            raise_if_interrupted()
            raise BundleError(f"{name}: Spark cannot read the dataset: {root_cause(exc)}") from None
        return found

    def _probed_listing(self, name: str, location: str) -> list[str]:
        """The data files below ``location`` as Spark lists them, and the commit markers
        :func:`gate.data.io.refuse_unfinished_dataset` looks for, each probed by name in
        the dataset's folder and in every folder holding its data files: ``_temporary``,
        ``.spark-staging-*``, ``_started_*``, ``_committed_*`` (and ``_SUCCESS`` in the
        dataset's folder). A path naming hidden entries only reads as a dataset without
        files when one exists, and fails with ``PATH_NOT_FOUND`` when none does, so a
        Spark Connect server answers without the client listing a file system. Markers are
        named as probed (``_started_*``): a Databricks job's ``_started_<id>`` and
        ``_committed_<id>`` cannot be paired by id this way, only their presence in a
        folder."""
        root = location.rstrip("/")
        files = self._probe(name, root, missing_ok=False) or []
        listing = [_below(root, path) for path in files]
        folders = sorted({entry.rpartition("/")[0] for entry in listing} | {""})
        for marker in ("_temporary", ".spark-staging-*", "_started_*"):
            holding = self._folders_holding(name, root, folders, marker)
            listing += [f"{folder}/{marker}".lstrip("/") for folder in holding]
            if marker == "_started_*":  # only where a job started is its commit looked for
                committed = self._folders_holding(name, root, holding, "_committed_*")
                listing += [f"{folder}/_committed_*".lstrip("/") for folder in committed]
        if self._probe(name, f"{root}/_SUCCESS") is not None:
            listing.append("_SUCCESS")
        return listing

    def _folders_holding(
        self, name: str, root: str, folders: Sequence[str], marker: str
    ) -> list[str]:
        """Those of ``folders`` (relative to ``root``; ``""`` is the root) in which
        ``marker`` is: the subfolders of one parent probed :data:`_PROBED_FOLDERS` to a
        glob, then one by one where a glob finds it. A brace never holds a ``/`` (Hadoop
        splits such a brace and drops its escapes: a review's ``b[x]`` became a class)."""
        holding = []
        children: dict[str, list[str]] = {}
        for folder in folders:
            if folder == "":
                if self._probe(name, f"{root}/{marker}") is not None:
                    holding.append("")
                continue
            parent, _, leaf = folder.rpartition("/")
            children.setdefault(parent, []).append(leaf)
        for parent, leaves in children.items():
            base = f"{root}/{_glob_escaped(parent)}/" if parent else f"{root}/"
            for first in range(0, len(leaves), _PROBED_FOLDERS):
                group = leaves[first : first + _PROBED_FOLDERS]
                if self._probe(name, f"{base}{_glob_of(group)}/{marker}") is None:
                    continue
                if len(group) > 1:  # in which of them
                    group = [
                        leaf
                        for leaf in group
                        if self._probe(name, f"{base}{_glob_of([leaf])}/{marker}") is not None
                    ]
                holding += [f"{parent}/{leaf}".lstrip("/") for leaf in group]
        return holding

    def _probe(self, name: str, path: str, *, missing_ok: bool = True) -> list[str] | None:
        """The data files Spark lists at ``path`` (a folder, a file or a glob; none for
        hidden entries), or None if nothing is there (``missing_ok``).

        Raises:
            BundleError: Spark cannot list ``path`` (or nothing is there, unless
                ``missing_ok``).
        """
        reader = self.session.read.format("binaryFile").option("recursiveFileLookup", "true")
        try:
            return list(reader.load(path).inputFiles())
        except answered_errors() as exc:
            raise_if_interrupted()
            if missing_ok and _condition(exc) == "PATH_NOT_FOUND":
                return None
            raise BundleError(f"{name}: Spark cannot read the dataset: {root_cause(exc)}") from None

    @_explain_lost_jvm
    @_cancellable
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
        except answered_errors() as exc:  # a read error, not a lost JVM
            raise_if_interrupted()  # PySpark's read replaced the signal with its own error
            if out_of_memory(exc):
                raise  # explained by _explain_lost_jvm
            if "maxResultSize" in str(exc):
                raise BundleError(
                    f"{name}: the dataset's files are larger than the session's "
                    "spark.driver.maxResultSize; raise it in the policy's engine.spark_conf "
                    "(0: no limit, the default of sessions the gate starts)"
                ) from None
            raise BundleError(f"{name}: Spark cannot read the dataset: {root_cause(exc)}") from None
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
    @_cancellable
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
    @_cancellable
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
    @_cancellable
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
        if n_records == 0 or len(synthetic_texts) == 0:  # nothing to join: Spark cannot
            from gate.engines.local import LocalEngine  # infer a schema without rows

            return LocalEngine(self.settings).ngram_disclosures(
                source_texts, synthetic_texts, users=users, config=config, progress=progress
            )
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
                        mapper(ngram_rows, with_user=True, **shortest), row_schema(True)
                    )
                )
                release_short = cache(
                    release_records.mapInArrow(
                        mapper(ngram_rows, with_user=False, **shortest), row_schema(False)
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
                    row_schema(True, with_flag=True),
                )
                release_flags = (
                    release_short.join(occurrences.select(*_KEY), on=_KEY)
                    .groupBy("doc")
                    .agg(F.collect_list("offset").alias("flags"))
                )
                release_long = release_records.join(release_flags, on="doc").mapInArrow(
                    mapper(longer_ngram_rows, source=False, n_min=n_min, n_max=config.n_max),
                    row_schema(False),
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
                # the records holding a rare n-gram (one with an n-gram not hashed has a
                # unique n_min-gram, which is rare)
                rare_docs = (
                    source.join(rare.select(*_KEY), on=_KEY).select("doc").distinct().toPandas()
                )
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
        rare_records = np.zeros(n_records, dtype=bool)
        rare_records[rare_docs["doc"].to_numpy(dtype=np.int64)] = True
        return NgramDisclosures(
            rare_features=int(rare_features),
            disclosed_features=int(disclosed_features),
            record_counts=record_counts,
            user_counts=user_counts,
            witness_record=witness["doc"].to_numpy(dtype=np.int64),
            witness_offset=witness["offset"].to_numpy(dtype=np.int64),
            witness_length=witness["n"].to_numpy(dtype=np.int64),
            witness_synthetic=witness["release_doc"].to_numpy(dtype=np.int64),
            rare_records=rare_records,
        )


def _condition(exc: BaseException) -> str | None:
    """The error condition of a PySpark error (``PATH_NOT_FOUND``, …), if it has one."""
    condition = getattr(exc, "getCondition", None)
    return condition() if callable(condition) else None


_SCHEME_AND_AUTHORITY = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:(?://[^/]*)?")


def _below(root: str, path: str) -> str:
    """``path``, a file Spark lists below the dataset ``root``, relative to it. Spark
    qualifies what it lists (``file:/x`` for ``file:///x``, ``hdfs://host:8020/x`` for
    ``hdfs:///x``, ``%20`` for a space), so the two are compared by their decoded paths
    (Hadoop reads the root's as written; a ``#`` or ``?`` in it is a character of a name,
    not a URI's fragment or query); a file whose path does not start with the root's (a
    root holding a glob) is named by its file name."""
    base = _SCHEME_AND_AUTHORITY.sub("", root).rstrip("/") + "/"
    found = unquote(_SCHEME_AND_AUTHORITY.sub("", path))
    return found[len(base) :] if found.startswith(base) else found.rpartition("/")[2]


def _glob_escaped(path: str) -> str:
    """``path`` with the characters of Hadoop's glob patterns escaped in each folder."""
    return "/".join(re.sub(r"([\\{}\[\]*?^!,-])", r"\\\1", part) for part in path.split("/"))


def _glob_of(leaves: Sequence[str]) -> str:
    """A Hadoop glob pattern matching exactly ``leaves``, folder names without ``/``."""
    escaped = [_glob_escaped(leaf) for leaf in leaves]
    return escaped[0] if len(escaped) == 1 else "{" + ",".join(escaped) + "}"


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
