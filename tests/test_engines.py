"""Engines: the local engine in memory and spilled to disk, and the Spark engine on a local
session and on a Spark Connect server, give the same counts, metrics and verdicts."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import gate.engines.local as local_module
from gate.api import check_release
from gate.cli import main
from gate.engines.base import create_engine
from gate.engines.local import LocalEngine
from gate.engines.spark_session import default_parallelism
from gate.errors import EngineError, InputError
from gate.features.ngram import NgramDisclosures
from gate.policy.models import EngineSettings, NgramFeatures
from gate.progress import NullProgress
from gate.registry import PluginUnavailableError

from .conftest import REPO, check_args, read_report, write_policy
from .test_ngram import WITNESS_FIELDS, copied_span_corpus, reference

NGRAM_POLICY = """\
version: 1
name: engines
engine:
  name: {engine}
  memory_mb: {memory_mb}
  chunk_mb: 0.01
audits:
  disclosure:
    features:
      - class: ngram
    thresholds:
      max_epsilon: 0.5
"""
EXAMPLE = REPO / "examples" / "bundle"


def assert_same(found: NgramDisclosures, expected: NgramDisclosures) -> None:
    assert (found.rare_features, found.disclosed_features) == (
        expected.rare_features,
        expected.disclosed_features,
    )
    for name in ("record_counts", "user_counts", "rare_records", *WITNESS_FIELDS):
        assert np.array_equal(getattr(found, name), getattr(expected, name)), name


def engine_counts(
    engine, seed: int, n_min: int = 2, n_max: int = 10
) -> tuple[NgramDisclosures, tuple]:
    source, synthetic, users, k = copied_span_corpus(seed)
    found = engine.ngram_disclosures(
        source,
        synthetic,
        users=users,
        config=NgramFeatures(n_min=n_min, n_max=n_max, max_users=k),
        progress=NullProgress(),
    )
    return found, reference(source, synthetic, users.tolist(), n_min, n_max, k)


def test_local_engine_spills_above_one_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spilled = []
    real = local_module.spilled_ngram_disclosures

    def counting(*args, **kwargs):
        spilled.append(kwargs["chunk_chars"])
        return real(*args, **kwargs)

    monkeypatch.setattr(local_module, "spilled_ngram_disclosures", counting)
    in_memory, expected = engine_counts(LocalEngine(EngineSettings()), 0)
    assert spilled == []
    small = EngineSettings(memory_mb=0, chunk_mb=0.0002, workdir=str(tmp_path))  # 209 B chunks
    found, _ = engine_counts(LocalEngine(small), 0)
    assert spilled == [209]
    counts, rare, disclosed, user_counts = expected
    assert found.record_counts.tolist() == counts and found.user_counts.tolist() == user_counts
    assert (found.rare_features, found.disclosed_features) == (rare, disclosed)
    assert_same(found, in_memory)
    assert list(tmp_path.iterdir()) == []


def test_local_engine_workdir_must_exist(tmp_path: Path) -> None:
    engine = LocalEngine(EngineSettings(memory_mb=0, workdir=str(tmp_path / "missing")))
    with pytest.raises(InputError, match=r"engine.workdir: .*missing is not a directory"):
        engine_counts(engine, 0)


def test_unknown_engine_is_bad_input(bundle_files: dict[str, Path], tmp_path: Path, capsys) -> None:
    assert main(check_args(bundle_files, tmp_path / "out", engine="nope")) == 2
    assert "--engine: no engine 'nope' in this installation" in capsys.readouterr().err
    args = check_args(bundle_files, tmp_path / "out", **{"spark-master": "local[1]"})
    assert main(args) == 2
    assert "--spark-master applies to the spark engine" in capsys.readouterr().err
    args = check_args(
        bundle_files, tmp_path / "out", engine="spark", **{"spark-master": "local[0]"}
    )
    assert main(args) == 2
    err = capsys.readouterr().err  # the flag that is wrong, in the gate's words
    assert (
        "gate: error: --spark-master: must be local, local[N]" in err and "Value error" not in err
    )
    policy = bundle_files["policy"]
    policy.write_text(policy.read_text() + "engine:\n  name: nope\n")
    assert main(check_args(bundle_files, tmp_path / "out")) == 2
    assert f"{policy}: engine.name: no engine 'nope'" in capsys.readouterr().err
    assert main(["policy", "validate", str(policy)]) == 2
    assert (
        "no engine 'nope' in this installation (available: local, spark; to run here, add "
        "--engine local)"
    ) in capsys.readouterr().err
    # a policy for another installation's engine runs (and validates) here with --engine local
    assert main(["policy", "validate", str(policy), "--engine", "local"]) == 0
    assert main(check_args(bundle_files, tmp_path / "out", engine="local")) == 1
    with pytest.raises(PluginUnavailableError, match="engine 'nope' is not available"):
        create_engine(EngineSettings(name="nope"))


def example_check(tmp_path: Path, name: str, *, memory_mb: float = 32, **kw) -> dict:
    """``gate check`` of the bundled example under an n-gram policy (``kw`` go to
    :func:`check_release`, e.g. ``engine="spark"``)."""
    policy = write_policy(
        tmp_path / f"{name}.yaml", NGRAM_POLICY.format(engine="local", memory_mb=memory_mb)
    )
    outcome = check_release(
        policy=policy,
        manifest=EXAMPLE / "split" / "split-manifest.json",
        synthetic=EXAMPLE / "synthetic.jsonl",
        out_dir=tmp_path / name,
        mlflow=False,
        **kw,
    )
    report = read_report(tmp_path / name)
    assert outcome.result.status == report["status"]
    return report


def comparable(report: dict) -> dict:
    """Verdict, metrics and witnesses (without the feature and user hashes, keyed per
    process; the source record id names the user; the release record's keyed hash is
    kept, so two processes must share ``GATE_WITNESS_KEY``)."""
    audit = report["audits"]["disclosure"]
    return {
        "status": report["status"],
        "metrics": audit["metrics"],
        "witnesses": [
            {k: v for k, v in w.items() if k not in ("feature_hash", "user_id")}
            for w in audit["witnesses"]
        ],
    }


def test_bundled_example_same_verdict_in_memory_and_spilled(tmp_path: Path) -> None:
    in_memory = example_check(tmp_path, "memory")
    spilled = example_check(tmp_path, "spilled", memory_mb=0)  # 10 kB chunks
    assert in_memory["status"] == "fail"
    assert in_memory["audits"]["disclosure"]["metrics"]["ngram.train_disclosures"] > 0
    assert comparable(spilled) == comparable(in_memory)
    assert spilled["policy"]["effective"]["engine"]["memory_mb"] == 0  # how it ran


# ---------------------------------------------------------------------------- spark

pyspark = pytest.importorskip("pyspark")


@pytest.fixture(scope="module")
def spark_engine():
    with create_engine(EngineSettings(name="spark", spark_partitions=3)) as engine:
        yield engine


def test_default_parallelism_of_a_local_session(spark_engine) -> None:
    assert default_parallelism(spark_engine.session) == 2  # local[2]


def test_a_signal_during_a_steps_start_is_answered_after_it(spark_engine, monkeypatch) -> None:
    """A review: the start of a step's thread (PySpark's ``InheritableThread``) calls the
    JVM from the calling thread; a signal answered there by PySpark's own handler, which
    calls the JVM too (``cancelAllJobs``), met the connection still reading and failed as
    a lost JVM. The signal is answered once the start has returned."""
    import signal

    from pyspark import InheritableThread

    from gate.engines.spark_session import run_cancellable

    session = spark_engine.session
    start = InheritableThread.start

    returned: list[bool] = []

    def start_after_a_signal(thread: InheritableThread) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        start(thread)
        returned.append(True)

    started: list[bool] = []

    def pysparks_handler(signum: int, frame: object) -> None:
        started.append(bool(returned))
        session.sparkContext.cancelAllJobs()
        raise KeyboardInterrupt

    monkeypatch.setattr(InheritableThread, "start", start_after_a_signal)
    previous = signal.signal(signal.SIGINT, pysparks_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_cancellable(session, lambda: time.sleep(0.2))
    finally:
        signal.signal(signal.SIGINT, previous)
    assert started == [True]


@pytest.mark.parametrize(
    ("seed", "n_min", "n_max"), [(0, 2, 10), (1, 2, 10), (2, 1, 6), (3, 4, 14), (4, 3, 3)]
)
def test_spark_matches_local_on_random_corpora(
    spark_engine, seed: int, n_min: int, n_max: int
) -> None:
    """Including unigrams (a longer n-gram's window of 1-grams may cross a record's end),
    lengths beyond most shared spans (the pruning from the shortest length) and one
    length only (nothing longer to hash)."""
    found, _ = engine_counts(spark_engine, seed, n_min, n_max)
    expected, (counts, rare, disclosed, user_counts) = engine_counts(
        LocalEngine(EngineSettings()), seed, n_min, n_max
    )
    assert found.record_counts.tolist() == counts and found.user_counts.tolist() == user_counts
    assert (found.rare_features, found.disclosed_features) == (rare, disclosed)
    assert_same(found, expected)


@pytest.mark.parametrize(("source", "synthetic"), [(["a b c"], []), ([], ["a b c"])])
def test_spark_matches_local_on_an_empty_side(spark_engine, source, synthetic) -> None:
    """A review: Spark raised CANNOT_INFER_EMPTY_SCHEMA where the local engine counts 0."""
    users = np.zeros(len(source), dtype=np.int64)
    config = NgramFeatures(n_min=1, n_max=2, max_users=1)
    found, expected = (
        engine.ngram_disclosures(
            source, synthetic, users=users, config=config, progress=NullProgress()
        )
        for engine in (spark_engine, LocalEngine(EngineSettings()))
    )
    assert_same(found, expected)
    assert found.disclosed_features == 0 and found.user_counts.sum() == 0


def test_bundled_example_same_verdict_on_spark(tmp_path: Path, spark_engine) -> None:
    local = example_check(tmp_path, "local")
    spark = example_check(tmp_path, "spark", engine="spark")  # --engine over the policy
    assert spark["policy"]["effective"]["engine"]["name"] == "spark"
    assert comparable(spark) == comparable(local)
    # the run used the session that was active in this process, and left it running
    assert spark_engine.session.range(3).count() == 3


def write_parts(frame, directory: Path, fmt: str, parts: int) -> Path:
    """``frame`` as a dataset of ``parts`` files, in order, as Spark writes one
    (``part-0000i.parquet`` or ``part-0000i.json`` and a ``_SUCCESS`` marker)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory.mkdir(parents=True)
    for i, piece in enumerate(np.array_split(np.arange(len(frame)), parts)):
        rows = frame.iloc[piece]
        if fmt == "parquet":
            pq.write_table(
                pa.Table.from_pandas(rows, preserve_index=False),
                directory / f"part-{i:05d}.parquet",
            )
        else:
            rows.to_json(directory / f"part-{i:05d}.json", orient="records", lines=True)
    (directory / "_SUCCESS").write_text("")
    return directory


def dataset_check(tmp_path: Path, name: str, train, holdout, synthetic, **kw) -> dict:
    """``gate check`` of the bundled example's records, given as ``train``, ``holdout``
    and ``synthetic`` paths (files or datasets), under the n-gram policy."""
    policy = write_policy(
        tmp_path / f"{name}.yaml", NGRAM_POLICY.format(engine="local", memory_mb=32)
    )
    check_release(
        policy=policy,
        train=train,
        holdout=holdout,
        synthetic=synthetic,
        out_dir=tmp_path / name,
        mlflow=False,
        **kw,
    )
    return read_report(tmp_path / name)


def example_datasets(tmp_path: Path) -> dict[str, Path | str]:
    """The bundled example's train as 3 Parquet part files, its holdout as 2 JSON Lines
    part files (a directory without a suffix), its release as a ``file://`` URI."""
    from gate.data.io import read_table

    def frame(path: Path):
        return read_table(path).frame.drop(columns="__line__")

    split = EXAMPLE / "split"
    return {
        "train": write_parts(
            frame(split / "train.jsonl"), tmp_path / "train.parquet", "parquet", 3
        ),
        "holdout": write_parts(frame(split / "holdout.jsonl"), tmp_path / "holdout", "jsonl", 2),
        "synthetic": write_parts(
            frame(EXAMPLE / "synthetic.jsonl"), tmp_path / "release.jsonl", "jsonl", 2
        ).as_uri(),
    }


def test_spark_reads_datasets_of_part_files_and_uris(tmp_path: Path, spark_engine) -> None:
    """Parquet and JSON Lines datasets read by Spark give the report of the files they
    were written from (same records, in the same order); their fingerprints are of the
    records, the same however many files hold them."""
    local = dataset_check(
        tmp_path,
        "local",
        EXAMPLE / "split" / "train.jsonl",
        EXAMPLE / "split" / "holdout.jsonl",
        EXAMPLE / "synthetic.jsonl",
    )
    paths = example_datasets(tmp_path / "parts")
    spark = dataset_check(tmp_path, "spark", **paths, engine="spark")
    assert comparable(spark) == comparable(local) and spark["status"] == "fail"
    inputs = spark["inputs"]
    assert inputs["train"]["format"] == "parquet dataset"
    assert inputs["holdout"]["format"] == "jsonl dataset"
    assert inputs["synthetic"]["path"].startswith("file:///")
    for name in ("train", "holdout", "synthetic"):
        assert inputs[name]["records"] == local["inputs"][name]["records"]
        assert inputs[name]["users"] == local["inputs"][name]["users"]
    parts = sorted(Path(paths["train"]).glob("part-*.parquet"))
    assert inputs["train"]["size_bytes"] == sum(part.stat().st_size for part in parts)
    as_uri = spark_engine.read_table(Path(paths["train"]).as_uri())
    assert as_uri.sha256 == inputs["train"]["sha256"]  # the same files, named another way


def test_spark_reads_a_local_dataset_whose_path_has_a_space_or_percent(
    tmp_path: Path, spark_engine
) -> None:
    """A local directory is handed to Spark as file:// plus its path: Path.as_uri()
    percent-encodes a space as %20, which Hadoop does not decode (PATH_NOT_FOUND)."""
    from gate.data.io import read_table

    frame = read_table(EXAMPLE / "split" / "train.jsonl").frame.drop(columns="__line__")
    plain = write_parts(frame, tmp_path / "plain" / "train.parquet", "parquet", 2)
    odd = write_parts(frame, tmp_path / "my data %41" / "train.parquet", "parquet", 2)
    found, expected = spark_engine.read_table(odd), spark_engine.read_table(plain)
    assert found.sha256 == expected.sha256 and len(found.frame) == len(frame)


def test_a_java_error_is_named_by_its_root_cause() -> None:
    from gate.engines.spark_session import root_cause

    trace = (
        "An error occurred while calling o51.getResult.\n"
        ": org.apache.spark.SparkException: Exception thrown in awaitResult:\n"
        "\tat org.apache.spark.util.SparkThreadUtils$.awaitResult(SparkThreadUtils.scala:56)\n"
        "Caused by: org.apache.spark.SparkException: Job aborted due to stage failure\n"
        "\tat scala.Option.foreach(Option.scala:437)\n"
        "Caused by: java.io.FileNotFoundException: part-00001.parquet (Permission denied)\n"
    )
    assert root_cause(RuntimeError(trace)) == (
        "java.io.FileNotFoundException: part-00001.parquet (Permission denied)"
    )
    assert root_cause(RuntimeError("[PATH_NOT_FOUND] Path does not exist\nmore")) == (
        "[PATH_NOT_FOUND] Path does not exist"
    )


def test_signals_during_the_start_of_spark_are_deferred() -> None:
    """A SIGTERM while the JVM starts is noted, not raised inside PySpark's launcher (which
    orphaned the JVM); a second one is acted on at once (a hung start stays interruptible);
    the handlers are restored afterwards, and an ignored signal stays ignored, also when
    the start installed a handler for it (PySpark's SIGINT handler)."""
    import signal

    from gate.engines.spark_session import signals_deferred

    class Stop(Exception):
        """Raised by the handler the gate had before the start."""

    def stop(signum: int, frame: object) -> None:
        raise Stop

    before = signal.signal(signal.SIGTERM, stop)
    try:
        received: list[int] = []
        with pytest.raises(Stop), signals_deferred(received):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)
            assert received == [signal.SIGTERM]
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)
        assert received == [signal.SIGTERM] * 2
        assert signal.getsignal(signal.SIGTERM) is stop
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with signals_deferred([]):
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
            # as PySpark's SparkContext installs its SIGINT handler over an "ignore"
            signal.signal(signal.SIGTERM, stop)
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_failed_start_restores_the_environment(tmp_path: Path) -> None:
    """In a process without a Spark session (this one has the tests' session)."""
    script = (
        "import os\n"
        "from gate.engines.spark import SparkEngine\n"
        "from gate.policy.models import EngineSettings\n"
        "settings = EngineSettings.model_construct(name='spark', spark_master='local[x]')\n"
        "engine = SparkEngine(settings)\n"
        "errors = []\n"
        "for attempt in range(2):\n"
        "    try:\n"
        "        engine.session\n"
        "    except RuntimeError as exc:\n"
        "        errors.append(exc)\n"
        "print('failed:', str(errors[0])[:56], '|', str(errors[0])[56:])\n"
        "local = engine._local_dir\n"
        "engine.close()\n"
        "print('PYSPARK_PYTHON' in os.environ, errors[0] is errors[1], local.exists())\n"
        "os.remove(str(errors[0]).rsplit(\"Spark's log: \", 1)[1].rstrip(')'))  # kept for a user\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"}
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300
    )
    assert run.returncode == 0, run.stderr
    failed, leaked = run.stdout.splitlines()
    assert failed.startswith("failed: Spark did not start on master 'local[x]'")
    # the reason Spark logged, not PySpark's JAVA_GATEWAY_EXITED; one start, its error
    # raised again by every later step; its local directory removed
    assert "Could not parse Master URL" in failed and "JAVA_GATEWAY_EXITED" not in failed
    assert leaked == "False True False", run.stderr


def test_spark_names_the_dataset_it_cannot_read(tmp_path: Path, spark_engine) -> None:
    from gate.data.io import read_table
    from gate.errors import BundleError

    missing = (tmp_path / "gone.parquet").as_uri()
    with pytest.raises(BundleError, match=rf"^{missing}: Spark cannot read the dataset: "):
        spark_engine.read_table(missing)
    broken = tmp_path / "broken.jsonl"
    broken.mkdir()
    (broken / "part-00000.json").write_text('{"text": "fine"}\n{"text": "cut\n')
    with pytest.raises(
        BundleError, match=r"^file:/.*/broken.jsonl/part-00000.json: line 2: not valid"
    ):
        spark_engine.read_table(broken)
    # a data file that links to nothing: Spark's listing leaves it out without a word
    linked = tmp_path / "linked.jsonl"
    linked.mkdir()
    (linked / "part-00000.json").write_text('{"text": "kept"}\n')
    (linked / "part-00001.json").symlink_to(tmp_path / "moved-away.json")
    for named in (linked, linked.as_uri()):
        with pytest.raises(
            BundleError, match=r"part-00001.json is a symbolic link to a missing file"
        ):
            spark_engine.read_table(named)
    (linked / "part-00001.json").unlink()
    (linked / "_temporary.json").symlink_to(tmp_path / "moved-away.json")  # not a data file
    assert spark_engine.read_table(linked).frame["text"].tolist() == ["kept"]
    # a local file is read as the local engine reads it: its bytes are the fingerprint
    example = EXAMPLE / "synthetic.jsonl"
    assert spark_engine.read_table(example).sha256 == read_table(example).sha256


def test_a_databricks_commit_is_finished_once_committed() -> None:
    """Databricks' committer leaves _started_<id> and, once committed, _committed_<id>
    beside it (a review: every such dataset had been refused)."""
    from gate.data.io import refuse_unfinished_dataset
    from gate.errors import BundleError

    done = ["_SUCCESS", "_started_57", "_committed_57", "part-00000-tid-57-c000.json"]
    refuse_unfinished_dataset("ds", done)
    refuse_unfinished_dataset("ds", ["day/_started_1", "day/_committed_1", "day/p.json"])
    for running in (["_started_57", "part-00000-tid-57-c000.json"], ["day/_started_1"]):
        with pytest.raises(BundleError, match=r"_started_.*output of a job that has not"):
            refuse_unfinished_dataset("ds", running)


def test_spark_refuses_a_dataset_whose_job_has_not_committed(tmp_path: Path, spark_engine) -> None:
    """A review gated a release whose clean part was committed and whose leaky part was
    still in _temporary/ (Spark's listing leaves it out): PASS. Uncommitted output, and a
    committer's part files without its _SUCCESS, are now refused."""
    from gate.errors import BundleError

    release = tmp_path / "release.jsonl"
    attempt = release / "_temporary" / "0" / "_temporary" / "attempt_1"
    attempt.mkdir(parents=True)
    (release / "part-00000.json").write_text('{"text": "committed"}\n')
    (attempt / "part-00001.json").write_text('{"text": "not yet"}\n')
    for named in (release, release.as_uri()):
        with pytest.raises(BundleError, match=r"_temporary: output of a job that has not"):
            spark_engine.read_table(named)
    # Hadoop's own listing, as for a dataset on HDFS or S3: hidden entries included
    listed = spark_engine._listing(str(release), release.as_uri())
    assert sorted(listed) == [
        "_temporary/0/_temporary/attempt_1/part-00001.json",
        "part-00000.json",
    ]
    (attempt / "part-00001.json").unlink()
    for folder in (attempt, attempt.parent, attempt.parent.parent, release / "_temporary"):
        folder.rmdir()
    spark_part = release / "part-00001-0b3c9a1e-5d2f-4c8e-9a7b-1c2d3e4f5a6b-c000.json"
    spark_part.write_text('{"text": "a failed job\'s committed task"}\n')
    with pytest.raises(BundleError, match=r"no _SUCCESS marker"):
        spark_engine.read_table(release)
    (release / "_SUCCESS").write_text("")
    assert len(spark_engine.read_table(release).frame) == 2


def _unfinished_datasets(root: Path) -> dict[str, Path]:
    """Datasets a job left part-way, one per kind of marker, with a finished one: in the
    dataset's folder and in a subfolder whose name holds glob characters."""
    made = {}
    kinds = ("finished", "temporary", "staging", "started", "no success", "nested", "hash root")
    for kind in kinds:
        dataset = root / ("run#3" if kind == "hash root" else kind.replace(" ", "-"))
        folder = dataset / "day {1}-[a]"
        folder.mkdir(parents=True)
        (dataset / "part-00000.json").write_text('{"text": "committed"}\n')
        (folder / "part-00001.json").write_text('{"text": "committed too"}\n')
        (folder / "_started_57").write_text("")
        (folder / "_committed_57").write_text("")
        (dataset / "_SUCCESS").write_text("")
        made[kind] = dataset
    (made["temporary"] / "_temporary" / "0").mkdir(parents=True)
    (made["temporary"] / "_temporary" / "0" / "part-00002.json").write_text('{"text": "not yet"}\n')
    (made["staging"] / "day {1}-[a]" / ".spark-staging-9").mkdir()
    (made["started"] / "day {1}-[a]" / "_committed_57").unlink()
    (made["no success"] / "_SUCCESS").unlink()
    # a review: a brace holding a / lost its escapes (b[x] became a class matching bx), and
    # a # in the dataset's name was read as a URI's fragment (its folders went unprobed)
    for kind, folder in (("nested", "k1/b[x]"), ("hash root", "f")):
        (made[kind] / folder).mkdir(parents=True)
        (made[kind] / folder / "part-00002.json").write_text('{"text": "committed too"}\n')
        (made[kind] / folder / "_started_58").write_text("")
    (made["nested"] / "k1" / "c").mkdir()
    (made["nested"] / "k1" / "c" / "part-00003.json").write_text('{"text": "committed too"}\n')
    (made["no success"] / "part-00003-0b3c9a1e-5d2f-4c8e-9a7b-1c2d3e4f5a6b-c000.json").write_text(
        '{"text": "a failed job\'s committed task"}\n'
    )
    return made


UNFINISHED_REFUSALS = {
    "temporary": r"_temporary: output of a job that has not",
    "staging": r"day \{1\}-\[a\]/\.spark-staging-\*: output of a job that has not",
    "started": r"day \{1\}-\[a\]/_started_\*: output of a job that has not",
    "no success": r"no _SUCCESS marker",
    "nested": r"k1/b\[x\]/_started_\*: output of a job that has not",
    "hash root": r"f/_started_\*: output of a job that has not",
}


def test_without_a_jvm_the_commit_markers_are_probed_by_name(tmp_path: Path, spark_engine) -> None:
    """A Spark Connect client has no JVM to list a URI's dataset with, and the
    unfinished-job check did not run there (what the gate read was what happened to be
    committed). The markers are now probed by name, which a Connect server answers; the
    probes run here on a local session, the Connect server's own test is below."""
    from gate.data.io import refuse_unfinished_dataset
    from gate.errors import BundleError

    datasets = _unfinished_datasets(tmp_path)
    finished = datasets.pop("finished")
    listed = spark_engine._probed_listing("finished", f"file://{finished}")
    assert sorted(listed) == [
        "_SUCCESS",
        "day {1}-[a]/_committed_*",
        "day {1}-[a]/_started_*",
        "day {1}-[a]/part-00001.json",
        "part-00000.json",
    ]
    refuse_unfinished_dataset("finished", listed)
    for kind, dataset in datasets.items():
        with pytest.raises(BundleError, match=UNFINISHED_REFUSALS[kind]):
            refuse_unfinished_dataset(kind, spark_engine._probed_listing(kind, f"file://{dataset}"))
    with pytest.raises(BundleError, match=r"Spark cannot read the dataset: .*PATH_NOT_FOUND"):
        spark_engine._probed_listing("gone", f"file://{tmp_path}/gone")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory: pytest.TempPathFactory):
    """A real Spark Connect server on 127.0.0.1, started here and stopped by PID."""
    home = Path(pyspark.__file__).parent
    port = _free_port()
    tmp_path = tmp_path_factory.mktemp("connect")
    log = (tmp_path / "connect.log").open("w")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_HOME": str(home)}
    server = subprocess.Popen(
        [
            str(home / "bin" / "spark-submit"),
            "--class",
            "org.apache.spark.sql.connect.service.SparkConnectServer",
            "--master",
            "local[2]",
            "--conf",
            f"spark.connect.grpc.binding.port={port}",
            "--conf",
            "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf",
            "spark.ui.enabled=false",
            "spark-internal",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            if server.poll() is not None:
                raise RuntimeError(
                    f"the Connect server exited: {(tmp_path / 'connect.log').read_text()}"
                )
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("the Connect server did not listen within 120 s")
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def test_gate_check_through_a_spark_connect_server(
    connect_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`gate check --engine spark --spark-master sc://...` in its own process (a Connect
    client marks its whole process as remote) on datasets the server reads, against the
    local engine's report of the files they were written from (one witness key for both
    processes: a redacted witness names its release record by a keyed hash)."""
    monkeypatch.setenv("GATE_WITNESS_KEY", "engine parity")
    policy = write_policy(tmp_path / "p.yaml", NGRAM_POLICY.format(engine="local", memory_mb=32))

    def args(train, holdout, synthetic, out: str) -> list[str]:
        return [
            "check",
            "--quiet",
            "--no-mlflow",
            "--policy",
            str(policy),
            "--train",
            str(train),
            "--holdout",
            str(holdout),
            "--synthetic",
            str(synthetic),
            "--out",
            str(tmp_path / out),
        ]

    datasets = example_datasets(tmp_path / "parts")
    remote = ["--engine", "spark", "--spark-master", connect_server]
    done = subprocess.run(
        [sys.executable, "-m", "gate", *args(**datasets, out="connect"), *remote],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr == ""  # Spark's chatter stays out of the terminal
    files = [EXAMPLE / "split" / "train.jsonl", EXAMPLE / "split" / "holdout.jsonl"]
    assert main(args(*files, EXAMPLE / "synthetic.jsonl", out="local")) == 1
    remote, local = read_report(tmp_path / "connect"), read_report(tmp_path / "local")
    assert remote["policy"]["effective"]["engine"]["spark_master"] == connect_server
    assert remote["inputs"]["train"]["format"] == "parquet dataset"
    assert comparable(remote) == comparable(local)


# in a process of its own: a Connect client marks its whole process as remote
CONNECT_SESSION_PROBE = """
import sys, threading
from pyspark.sql import SparkSession
from gate.engines.base import create_engine
from gate.policy.models import EngineSettings

master = sys.argv[1]
# a caller's session, opened in another thread: the process's default, not this thread's
opened = []
thread = threading.Thread(target=lambda: opened.append(SparkSession.builder.remote(master).getOrCreate()))
thread.start()
thread.join()
caller = opened[0]

def engine(**conf):
    return create_engine(EngineSettings(name="spark", spark_master=master, spark_conf=conf))

with engine(**{"spark.sql.ansi.enabled": "false"}) as gate:
    gate._size_shuffles(100)
    print("own session:", gate.session is not caller)
    print("applied:", gate.session.conf.get("spark.sql.ansi.enabled"))
    print("shuffle partitions:", gate.session.conf.get("spark.sql.shuffle.partitions"))
print("caller untouched:", caller.conf.get("spark.sql.ansi.enabled"), caller.range(3).count())
for conf in ({"spark.driver.memory": "2g"}, {"spark.sql.shuffle.partitions": "many"}):
    with engine(**conf) as gate:
        try:
            gate.session
        except Exception as exc:
            print("refused:", type(exc).__name__, str(exc).splitlines()[0])
"""


CONNECT_LISTING_PROBE = """
import sys
from gate.data.io import refuse_unfinished_dataset
from gate.engines.base import create_engine
from gate.errors import BundleError
from gate.policy.models import EngineSettings

with create_engine(EngineSettings(name="spark", spark_master=sys.argv[1])) as gate:
    for kind, uri in zip(sys.argv[2::2], sys.argv[3::2]):
        try:
            refuse_unfinished_dataset(kind, gate._listing(kind, uri))  # as for hdfs:// or s3a://
            print(kind, "read")
        except BundleError as exc:
            print(kind, "refused:", exc)
"""


def test_a_connect_server_answers_the_unfinished_job_check(
    connect_server: str, tmp_path: Path
) -> None:
    """Through a real Spark Connect server, a URI's dataset left part-way by its job is
    refused (before, the check did not run through Connect) and a finished one is read."""
    datasets = _unfinished_datasets(tmp_path)
    pairs = [
        str(x)
        for kind, path in datasets.items()
        for x in (kind.replace(" ", "_"), f"file://{path}")
    ]
    done = subprocess.run(
        [sys.executable, "-c", CONNECT_LISTING_PROBE, connect_server, *pairs],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    verdicts = dict(line.split(" ", 1) for line in done.stdout.strip().split("\n"))
    assert verdicts.pop("finished") == "read"
    for kind, refusal in UNFINISHED_REFUSALS.items():
        assert re.search(refusal, verdicts[kind.replace(" ", "_")]), verdicts


def test_a_connect_session_takes_the_policys_session_settings(connect_server: str) -> None:
    """The gate opens a Connect session of its own (never the caller's), which gets the
    policy's session settings and shuffles sized as a local session's (two per core of
    the server's local[2]; Spark's 200 made the bundled example 2.3x slower); a server
    setting is an error that names it, a bad value keeps Spark's own error."""
    done = subprocess.run(
        [sys.executable, "-c", CONNECT_SESSION_PROBE, connect_server],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().split("\n")
    assert lines[:4] == [
        "own session: True",
        "applied: false",
        "shuffle partitions: 4",
        "caller untouched: true 3",
    ]
    server_setting, bad_value = lines[4:]
    assert server_setting.startswith("refused: EngineError")
    assert "engine.spark_conf sets 'spark.driver.memory'" in server_setting
    assert f"where the Connect server at {connect_server} is started" in server_setting
    assert bad_value.startswith("refused: ") and "RuntimeError" not in bad_value
    assert "spark.sql.shuffle.partitions" in bad_value


PII_TEXTS = [
    "Write to jane.roe@example.org or call 415-555-0134 before Friday.",
    "no contact details here",
    "Mail bob@example.com, cc jane.roe@example.org; fax 212 555 0199.",
    "",
    "Visit https://example.net/path or mail ops@example.net.",
] * 3


def test_spark_pii_detection_is_the_local_one(spark_engine) -> None:
    from gate.policy.models import PiiFeatures

    config = PiiFeatures(engine="patterns")
    local = LocalEngine(EngineSettings()).detect_pii(
        PII_TEXTS, config=config, progress=NullProgress(), description="PII"
    )
    found = spark_engine.detect_pii(
        PII_TEXTS, config=config, progress=NullProgress(), description="PII"
    )
    assert len(local.values) >= 12
    assert found.docs.tolist() == local.docs.tolist()
    assert (found.entity_types, found.raw, found.values) == (
        local.entity_types,
        local.raw,
        local.values,
    )


def test_spark_embeddings_are_the_local_ones(spark_engine) -> None:
    from gate.policy.models import SemanticFeatures

    texts = [
        f"record {i}: the patient reported {'mild ' * (i % 4)}pain on day {i}" for i in range(12)
    ]
    texts += texts[3:6]  # repeated texts are sent once and come back to every row
    config = SemanticFeatures()
    local = LocalEngine(EngineSettings()).encode(
        texts, config=config, progress=NullProgress(), description="embed"
    )
    found = spark_engine.encode(texts, config=config, progress=NullProgress(), description="embed")
    assert found.shape == local.shape == (15, 384)
    assert np.min(np.sum(found * local, axis=1)) > 0.9999  # same vectors, other batches
    np.testing.assert_array_equal(found[12:], found[3:6])


@pytest.mark.slow
def test_standard_policy_same_verdict_on_spark(tmp_path: Path, spark_engine) -> None:
    """Every class of the standard policy (n-grams, PII with spaCy, MiniLM embeddings) on
    Spark against the local engine, on the bundled example."""

    def run(name: str, **kw) -> dict:
        check_release(
            policy=REPO / "policies" / "standard.yaml",
            manifest=EXAMPLE / "split" / "split-manifest.json",
            synthetic=EXAMPLE / "synthetic.jsonl",
            out_dir=tmp_path / name,
            mlflow=False,
            **kw,
        )
        return read_report(tmp_path / name)

    local, spark = run("local"), run("spark", engine="spark")
    assert spark["status"] == local["status"] == "fail"
    for audit in ("disclosure", "membership"):
        ours, theirs = spark["audits"][audit]["metrics"], local["audits"][audit]["metrics"]
        assert ours.keys() == theirs.keys()
        for key, value in theirs.items():
            if isinstance(value, float):  # embeddings of other batches: equal to ~1e-6
                assert ours[key] == pytest.approx(value, rel=1e-4, abs=1e-6), key
            else:
                assert ours[key] == value, key


@pytest.mark.slow
def test_long_texts_read_in_windows_on_spark(tmp_path: Path, spark_engine) -> None:
    """``windows: all`` on Spark: the driver cuts the windows, Spark embeds them; the
    same disclosures, similarities and membership scores as the local engine on e-mails
    copied after a long preamble."""
    from .test_text_windows import write_preamble_bundle

    files = write_preamble_bundle(tmp_path)
    policy = write_policy(
        tmp_path / "windows.yaml",
        "version: 1\nname: windows\naudits:\n  disclosure:\n"
        "    features: [{class: semantic, windows: all, rare_quantile: 1.0}]\n"
        "    thresholds: {max_epsilon: 0.5}\n"
        "  membership:\n    scorers: [{scorer: embedding}]\n"
        "    thresholds: {max_auc: 0.6}\n",
    )
    reports = {}
    for engine in ("local", "spark"):
        out = tmp_path / engine
        main([*check_args({**files, "policy": policy}, out, "--no-mlflow", engine=engine)])
        reports[engine] = read_report(out)
    local, spark = reports["local"], reports["spark"]
    assert spark["status"] == local["status"] == "fail"
    assert local["audits"]["disclosure"]["metrics"]["semantic.train_disclosures"] >= 4
    for audit in ("disclosure", "membership"):
        ours, theirs = spark["audits"][audit]["metrics"], local["audits"][audit]["metrics"]
        assert ours.keys() == theirs.keys()
        for key, value in theirs.items():
            assert ours[key] == pytest.approx(value, rel=1e-4, abs=1e-6), key
    windows = spark["audits"]["disclosure"]["details"]["semantic"]["windows"]
    assert windows == local["audits"]["disclosure"]["details"]["semantic"]["windows"]
    assert windows["mode"] == "all"


def test_only_a_gone_jvm_counts_as_lost() -> None:
    """A Java exception the JVM answered with (a failed read or query) keeps its own
    message; a broken or refused gateway connection is the lost-JVM error."""
    from py4j.protocol import Py4JError, Py4JJavaError, Py4JNetworkError

    from gate.engines.spark_session import lost_jvm

    class JavaObjectId:  # the reference Py4J keeps to the Java exception object
        def __init__(self, target_id: str) -> None:
            self._target_id = target_id

    assert lost_jvm(Py4JNetworkError("Answer from Java side is empty"))
    assert lost_jvm(Py4JError("An error occurred while calling o42.count"))
    assert lost_jvm(ConnectionRefusedError(111, "Connection refused"))
    answered = Py4JJavaError("An error occurred while calling o7.load", JavaObjectId("o8"))
    assert not lost_jvm(answered)
    assert not lost_jvm(ValueError("not the JVM"))


def test_an_out_of_memory_answer_is_an_error_that_says_what_to_change() -> None:
    """A query the JVM failed for want of memory (Spark's SparkOutOfMemoryError, with a
    stack trace of hundreds of lines) raises one error naming the settings to raise and
    the step; other answered errors keep their own message, and a Python error naming
    Java's OutOfMemoryError is not taken for Spark's."""
    from pyspark.errors import PySparkException

    from gate.engines.spark import SparkEngine, _explain_lost_jvm
    from gate.engines.spark_session import out_of_memory

    no_memory = PySparkException(
        message="[UNABLE_TO_ACQUIRE_MEMORY] Unable to acquire 65536 bytes of memory, got 0."
    )
    missing = PySparkException(message="[PATH_NOT_FOUND] Path does not exist: file:/x.")
    assert out_of_memory(no_memory) == "UNABLE_TO_ACQUIRE_MEMORY"
    assert out_of_memory(missing) is None
    assert out_of_memory(ValueError("java.lang.OutOfMemoryError")) is None

    def failing(error: Exception):
        def step(engine: SparkEngine) -> None:
            raise error

        return _explain_lost_jvm(step)

    engine = SparkEngine(EngineSettings(name="spark", spark_master="local[2]"))  # no session
    with pytest.raises(RuntimeError) as raised:
        failing(no_memory)(engine)
    message = str(raised.value)
    assert message.startswith(
        "Spark (local[2]) ran out of memory during step (UNABLE_TO_ACQUIRE_MEMORY)"
    )
    for setting in ("spark.driver.memory", "spark.executor.memory", "spark.sql.shuffle.partitions"):
        assert setting in message
    assert raised.value.__cause__ is no_memory
    with pytest.raises(PySparkException, match="PATH_NOT_FOUND"):
        failing(missing)(engine)


def test_a_python_worker_that_dies_is_an_error_that_says_so(spark_engine) -> None:
    """A review killed a task's Python worker: the error was a Py4JJavaError whose
    message the gate withholds (it may quote data), which said nothing of the cause."""
    from gate.engines.spark import _explain_lost_jvm

    def step(engine) -> None:
        def die(batches):
            os._exit(1)
            yield from batches

        engine.session.range(4, numPartitions=1).mapInPandas(die, "id long").collect()

    with pytest.raises(EngineError, match="a Python worker running a task of step died"):
        _explain_lost_jvm(step)(spark_engine)
    assert spark_engine.session.range(3).count() == 3  # the session goes on


def _run_python(
    code: str,
    *args: str,
    cwd: Path,
    timeout: float,
    environ: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` with ``args`` in a Python process of its own (a JVM killed, a signal
    sent), with ``environ`` added to this one's environment, and require that it
    succeeds."""
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=cwd,
        env={**os.environ, **(environ or {})},
    )
    assert done.returncode == 0, done.stderr
    return done


def test_an_interrupted_start_leaves_the_users_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A review: a start interrupted after it set PYSPARK_PIN_THREAD, then read again,
    saved the gate's value as the user's, which close() then "restored"."""
    import gate.engines.spark as spark_module
    from gate.engines.spark import SparkEngine
    from gate.policy.models import EngineSettings

    monkeypatch.setenv("PYSPARK_PIN_THREAD", "false")

    def interrupted_start(master: str, conf: dict[str, str]) -> object:
        os.environ["PYSPARK_PIN_THREAD"] = "true"  # as a start sets it before the launch
        raise KeyboardInterrupt

    monkeypatch.setattr(spark_module, "start_session", interrupted_start)
    from pyspark.sql import SparkSession

    # no caller's session (a fixture's may be active in this process)
    monkeypatch.setattr(SparkSession, "getActiveSession", staticmethod(lambda: None))
    monkeypatch.setattr(spark_module, "process_session", lambda: None)
    engine = SparkEngine(EngineSettings(name="spark", spark_master="local[1]"))
    for _ in range(2):
        with pytest.raises(KeyboardInterrupt):
            _ = engine.session
    engine.close()
    assert os.environ["PYSPARK_PIN_THREAD"] == "false"


def test_a_callers_session_is_used_from_another_thread_and_not_stopped(tmp_path: Path) -> None:
    """A review: with pinned threads (PySpark's default) a caller's session is active in
    the thread that started it only; the gate, run in another thread, took it as its own,
    set its settings and stopped it on close. In its own process: this one's session is
    the module's."""
    code = """
import threading
from pyspark.sql import SparkSession
from gate.engines.base import create_engine
from gate.policy.models import EngineSettings

caller = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
caller.sparkContext.setLogLevel("ERROR")
caller.conf.set("spark.sql.shuffle.partitions", "7")
def gate_in_a_thread():
    with create_engine(EngineSettings(name="spark", spark_master="local[1]")) as gate:
        print("THE CALLER'S", gate.session is caller)
        gate._size_shuffles(10**9)
        print("COUNTED", gate.session.range(5).count())
thread = threading.Thread(target=gate_in_a_thread)
thread.start()
thread.join()
print("SETTINGS KEPT", caller.conf.get("spark.sql.shuffle.partitions"))
print("STILL RUNS", caller.range(3).count())
caller.stop()
"""
    # pinned threads, as PySpark's default, whatever this environment sets
    done = _run_python(code, cwd=tmp_path, timeout=240, environ={"PYSPARK_PIN_THREAD": "true"})
    assert done.stdout.split("\n")[:4] == [
        "THE CALLER'S True",
        "COUNTED 5",
        "SETTINGS KEPT 7",
        "STILL RUNS 3",
    ], done.stdout


def test_a_failed_start_leaves_no_jvm_and_no_broken_context(tmp_path: Path) -> None:
    """A review: after a start that failed, PySpark's JVM stayed up and its broken context
    active, so a later engine with right settings in the same process could not start.
    In its own process: this one's session is the module's."""
    code = """
import os, subprocess
from gate.engines.spark import SparkEngine
from gate.errors import EngineError
from gate.policy.models import EngineSettings

wrong = {"spark.memory.fraction": "7"}
bad = SparkEngine(EngineSettings(name="spark", spark_master="local[1]", spark_conf=wrong))
try:
    bad.session
    raise SystemExit("a session started with spark.memory.fraction 7")
except EngineError as exc:
    assert "spark.memory.fraction should be between 0 and 1" in str(exc), exc
bad.close()
children = subprocess.run(
    ["ps", "--ppid", str(os.getpid()), "-o", "comm="], capture_output=True, text=True
).stdout.split()
assert "java" not in children, children
with SparkEngine(EngineSettings(name="spark", spark_master="local[1]")) as good:
    assert good.session.range(3).count() == 3
"""
    _run_python(code, cwd=tmp_path, timeout=240)


# the CLI's variant (its quieting run first) in the slow run: the default run's time
@pytest.mark.parametrize("cli", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_a_lost_jvm_is_an_error_that_says_what_to_change(tmp_path: Path, cli: bool) -> None:
    """The JVM of a session the engine started is killed (as the kernel's OOM killer or
    the JVM's own OutOfMemoryError would end it): the step raises one error that names
    spark.driver.memory and Spark's log, which is kept, and closing the engine does not
    hide it; nothing else reaches the terminal, and Py4J's traceback of the call the JVM
    died during is in the log, also where the CLI's quieting (which drops Py4J's records)
    ran first. In its own process: a killed JVM cannot be replaced in this one."""
    quiet = "from gate.quiet import quiet_libraries\nquiet_libraries(verbose=False)\n"
    code = (
        (quiet if cli else "")
        + """
import collections, contextlib, signal, sys, threading, time
from pathlib import Path
import numpy as np
from py4j.clientserver import SHUTDOWN_FINALIZER_WORKER
from gate.engines.spark import SparkEngine
from gate.policy.models import EngineSettings, NgramFeatures
from gate.progress import NullProgress

engine = SparkEngine(EngineSettings(name="spark", spark_master="local[1]"))
try:
    with engine:
        gateway = engine.session.sparkContext._gateway
        log = engine._log
        local = engine._local_dir
        print("LOCAL DIR", engine.session.conf.get("spark.local.dir") == str(local))
        engine.ngram_disclosures(  # Python workers connect to the accumulator server
            ["a b c"], ["a b c"], users=np.array([0]),
            config=NgramFeatures(n_min=1, n_max=2), progress=NullProgress(),
        )
        connected, stopped = threading.Event(), threading.Event()
        def call_the_jvm():  # killed with the command unread, the JVM resets Py4J's read
            # a pinned gateway gives each thread a connection of its own: opened while the
            # JVM answers, so that the broken call is a command, not the connection's
            # authentication (which Py4J does not log)
            gateway.jvm.java.lang.System.nanoTime()
            connected.set()
            stopped.wait()
            try:
                gateway.jvm.java.lang.System.nanoTime()
            except Exception as exc:
                print("CALL BROKEN", type(exc).__name__)
        def frame_names(thread):
            frame, names = sys._current_frames().get(thread.ident), set()
            while frame is not None:
                names.add(frame.f_code.co_name)
                frame = frame.f_back
            return names
        def reading(thread):  # the command is sent and Py4J waits for its answer
            return {"send_command", "readinto"} <= frame_names(thread)
        caller = threading.Thread(target=call_the_jvm)
        caller.start()
        def halted(pid):  # every thread of the JVM stopped: none reads the command
            states = set()
            for task in Path(f"/proc/{pid}/task").iterdir():
                with contextlib.suppress(OSError):  # a thread that ended meanwhile
                    states.add(task.joinpath("stat").read_text().rpartition(")")[2].split()[0])
            return states <= {"T", "t"}
        connected.wait()
        # Py4J's FinalizerWorker sends the releases of Java objects Python dropped, once a
        # second: one cut by the kill could be logged after the engine's filter is gone. It
        # sends what it holds and ends; later releases wait in a queue nobody reads.
        client = gateway._gateway_client
        queued, client.finalizer_deque = client.finalizer_deque, collections.deque()
        finalizer = next(t for t in threading.enumerate() if type(t).__name__ == "FinalizerWorker")
        queued.appendleft(SHUTDOWN_FINALIZER_WORKER)
        finalizer.join()
        gateway.proc.send_signal(signal.SIGSTOP)
        deadline = time.monotonic() + 60
        while not halted(gateway.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        print("JVM HALTED", halted(gateway.proc.pid))
        stopped.set()
        deadline = time.monotonic() + 60  # a loaded machine can run the thread late
        while not reading(caller) and time.monotonic() < deadline:
            time.sleep(0.01)
        print("CALL SENT", reading(caller))
        gateway.proc.kill()
        gateway.proc.wait()
        caller.join()
        engine.ngram_disclosures(
            ["a b c"], ["a b c"], users=np.array([0]),
            config=NgramFeatures(n_min=1, n_max=2), progress=NullProgress(),
        )
except RuntimeError as error:
    print("ERROR", error)
    print("LOG KEPT", log is not None and log.exists())
    if log is not None:
        print("PY4J IN LOG", "Py4J: Exception while sending command." in log.read_text())
        log.unlink()  # kept for a user; a test leaves nothing behind
    print("LOCAL DIR GONE", not local.exists())
import logging
print("ENGINE FILTER LEFT", any(type(f).__name__ == "Py4JRecordsToLog" for f in logging.getLogger().filters))
"""
    )
    done = _run_python(code, cwd=tmp_path, timeout=300)
    assert "stopped answering during ngram_disclosures" in done.stdout
    # PySpark's accumulator server lost its connection, and Py4J's call may break while it
    # reads the answer: both tracebacks go to Spark's log
    assert "Traceback" not in done.stderr, done.stderr
    assert "ENGINE FILTER LEFT False" in done.stdout  # it left with its session
    assert "JVM HALTED True" in done.stdout and "CALL SENT True" in done.stdout
    # the read is reset: Py4J logs the broken call and answers it with an error
    assert "CALL BROKEN Py4JError" in done.stdout and "PY4J IN LOG True" in done.stdout
    assert "spark.driver.memory" in done.stdout and "Spark's log: " in done.stdout
    assert "LOG KEPT True" in done.stdout
    # the shuffle files of a JVM that died hold texts: its local directory is removed
    assert "LOCAL DIR True" in done.stdout and "LOCAL DIR GONE True" in done.stdout


def test_py4j_records_of_the_root_logger_go_to_sparks_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Py4J logs a call whose connection broke while it read the answer (the JVM died
    mid-call: a CI run met it where the usual run breaks on sending) with
    ``logging.exception`` on the root logger: the record, with its traceback, goes to
    Spark's log; a record of any other code passes; a log already removed drops it. Also
    where the CLI's filter, which drops them, was added first (tests that run the CLI in
    this process add it)."""
    import logging

    from gate.engines.spark_session import Py4JRecordsToLog
    from gate.quiet import Py4JRootRecords

    log = tmp_path / "spark.log"
    log.write_text("")
    py4j_file = os.sep.join(["", "site-packages", "py4j", "java_gateway.py"])
    logged_by_py4j = compile(
        "try:\n    raise ConnectionResetError(104, 'Connection reset by peer')\n"
        "except ConnectionResetError:\n    logging.exception('Exception while sending command.')\n",
        py4j_file,
        "exec",
    )
    records = Py4JRecordsToLog(log)
    root = logging.getLogger()
    root.filters.insert(0, records)  # as SparkEngine adds it
    try:
        with caplog.at_level(logging.INFO):
            exec(logged_by_py4j, {"logging": logging})
            logging.warning("the caller's own record")
            log.unlink()
            exec(logged_by_py4j, {"logging": logging})
    finally:
        root.removeFilter(records)
    assert [r.getMessage() for r in caplog.records] == ["the caller's own record"]
    assert not log.exists()  # not created again
    log.write_text("")
    quiet = Py4JRootRecords()
    root.addFilter(quiet)
    root.filters.insert(0, records)
    try:
        with caplog.at_level(logging.INFO):
            exec(logged_by_py4j, {"logging": logging})
    finally:
        root.removeFilter(records)
        root.removeFilter(quiet)
    text = log.read_text()
    assert text.startswith("ERROR Py4J: Exception while sending command.\nTraceback")
    assert "ConnectionResetError: [Errno 104] Connection reset by peer" in text


# A step of three actions on the session of master sys.argv[1], each sent a SIGINT
# (Python's own handler, also where a test runs in the background with SIGINT ignored):
# during a query of minutes read by the Arrow collect, during one read as rows, and
# between two queries while no job runs. A classic session counts the jobs left through
# its status tracker; a Connect client has none, so a query that needs the server's two
# cores is timed after each action (a query left running would hold them).
CTRL_C_PROBE = """
import os, signal, sys, threading, time
signal.signal(signal.SIGINT, signal.default_int_handler)
from gate.quiet import quiet_libraries
quiet_libraries(verbose=False)
from gate.engines.spark import SparkEngine
from gate.engines.spark_session import run_cancellable
from gate.policy.models import EngineSettings

engine = SparkEngine(EngineSettings(name="spark", spark_master=sys.argv[1]))
with engine:
    session = engine.session
    from pyspark.sql import functions as F
    slow = F.udf(lambda x: (time.sleep(0.5), x)[1], "long")  # 200 s on one core
    query = session.range(0, 400, numPartitions=4).select(slow("id").alias("x"))
    between_queries = threading.Event()
    finished = []

    def two_queries():  # the signal comes between them, while no job runs
        session.range(0, 2, numPartitions=1).select(slow("id")).collect()
        between_queries.set()
        time.sleep(2)
        query.collect()
        finished.append(True)

    if sys.argv[1].startswith("sc://"):
        both_cores = session.range(0, 2, numPartitions=2).select(slow("id"))

        def when_a_job_runs():
            time.sleep(4)

        def after(name):
            started = time.perf_counter()
            both_cores.collect()
            print(name, "CORES FREE AFTER", round(time.perf_counter() - started, 1))
    else:
        from pyspark import SparkContext
        print("GATEWAY", type(SparkContext._gateway).__name__)
        tracker = session.sparkContext.statusTracker()

        def when_a_job_runs():
            while not tracker.getActiveJobsIds():
                time.sleep(0.05)
            time.sleep(1)

        def after(name):  # a cancelled job leaves the tracker's list soon after
            deadline = time.monotonic() + 10
            while tracker.getActiveJobsIds() and time.monotonic() < deadline:
                time.sleep(0.1)
            print(name, "JOBS LEFT", tracker.getActiveJobsIds())

    for name, action, ready in (
        ("toArrow", query.toArrow, when_a_job_runs),
        ("collect", query.collect, when_a_job_runs),
        ("between", two_queries, lambda: between_queries.wait() and time.sleep(0.5)),
    ):
        sent = []
        def interrupt():
            ready()
            sent.append(time.perf_counter())
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        threading.Thread(target=interrupt, daemon=True).start()
        try:
            run_cancellable(session, action)
            print(name, "NOT INTERRUPTED")
        except KeyboardInterrupt:
            print(name, "RAISED AFTER", round(time.perf_counter() - sent[0], 1))
        after(name)
    time.sleep(3)  # a step left running would have started its second query by now
    if not sys.argv[1].startswith("sc://"):
        print("JOBS LATER", tracker.getActiveJobsIds())
    print("SECOND QUERY FINISHED", bool(finished))
    print("AFTER", session.range(3).count())
print("PIN_THREAD AFTER", os.environ.get("PYSPARK_PIN_THREAD"))
"""


def _ctrl_c_probe(master: str, tmp_path: Path, *, timeout: float, **environ: str) -> list[str]:
    """The lines :data:`CTRL_C_PROBE` printed on ``master``; each action was interrupted
    within 10 s of its signal, the second query of the step never ran, the session
    answers afterwards, and nothing reached stderr."""
    done = _run_python(CTRL_C_PROBE, master, cwd=tmp_path, timeout=timeout, environ=environ)
    lines = done.stdout.splitlines()
    for name in ("toArrow", "collect", "between"):
        raised = [line for line in lines if line.startswith(f"{name} RAISED AFTER ")]
        assert raised, done.stdout
        assert float(raised[0].rsplit(" ", 1)[1]) < 10
    assert "SECOND QUERY FINISHED False" in lines and "AFTER 3" in lines
    assert "Traceback" not in done.stderr and "KeyboardInterrupt" not in done.stderr
    return lines


@pytest.mark.parametrize("pinned", [pytest.param("true", marks=pytest.mark.slow), "false"])
def test_a_ctrl_c_cancels_a_spark_query_at_once(tmp_path: Path, pinned: str) -> None:
    """A SIGINT during a query of minutes is raised within seconds, through PySpark's Arrow
    collect (whose C++ reader retried the interrupted read until the query ended) and
    through a collect of rows, once the query's jobs are cancelled; a SIGINT between two
    queries of a step (no job running) cancels the second as it starts. In its own
    process: the signal goes to its main thread. Also with ``PYSPARK_PIN_THREAD=false``:
    a JVM the gate launches pins threads all the same (a job tag is on the JVM thread
    that submits the job; unpinned, a query whose call took the connection of another
    thread, here the probe's, ran untagged: a CI run waited 200 s for it), and the
    variable is the user's again once the engine closes."""
    lines = _ctrl_c_probe("local[1]", tmp_path, timeout=120, PYSPARK_PIN_THREAD=pinned)
    assert "GATEWAY ClientServer" in lines
    for name in ("toArrow", "collect", "between"):
        # the signal is raised once the action has stopped: no job of it is left
        assert f"{name} JOBS LEFT []" in lines
    assert "JOBS LATER []" in lines
    assert f"PIN_THREAD AFTER {pinned}" in lines


# A caller's session whose JVM was launched unpinned; the step's query is made to take
# another Py4J connection than the one its tag is on (a thread holds that one).
CALLER_UNPINNED_PROBE = """
import os, signal, sys, threading, time
os.environ["PYSPARK_PIN_THREAD"] = "false"
os.environ["PYSPARK_PYTHON"] = sys.executable
from gate.quiet import quiet_libraries
quiet_libraries(verbose=False)
from pyspark import SparkContext
from pyspark.sql import SparkSession, functions as F
from gate.engines.spark import SparkEngine
from gate.engines.spark_session import run_cancellable
from gate.policy.models import EngineSettings

caller = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
caller.sparkContext.setLogLevel("ERROR")
# a program's own handler, as the gate's CLI installs (PySpark's cancels every job; a
# SIGTERM has none)
signal.signal(signal.SIGINT, signal.default_int_handler)
print("GATEWAY", type(SparkContext._gateway).__name__)
with SparkEngine(EngineSettings(name="spark", spark_master="local[1]")) as engine:
    session = engine.session
    print("THE CALLER'S", session is caller)
    slow = F.udf(lambda x: (time.sleep(0.5), x)[1], "long")  # 200 s on one core
    query = session.range(0, 400, numPartitions=4).select(slow("id").alias("x"))
    tracker = session.sparkContext.statusTracker()

    def action():
        holder = threading.Thread(target=lambda: session._jvm.java.lang.Thread.sleep(3000))
        holder.start()  # takes the connection the tag was added on, the last one returned
        time.sleep(0.5)
        query.collect()

    sent = []

    def interrupt():
        time.sleep(5)
        sent.append(time.perf_counter())
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    try:
        run_cancellable(session, action)
        print("NOT INTERRUPTED")
    except KeyboardInterrupt:
        print("RAISED AFTER", round(time.perf_counter() - sent[0], 1))
    deadline = time.monotonic() + 10  # a cancelled job leaves the tracker's list soon after
    while tracker.getActiveJobsIds() and time.monotonic() < deadline:
        time.sleep(0.1)
    print("JOBS LEFT", tracker.getActiveJobsIds())
caller.stop()
"""


def test_a_ctrl_c_cancels_a_query_of_a_callers_unpinned_session(tmp_path: Path) -> None:
    """A review: a caller's session whose JVM was launched with
    ``PYSPARK_PIN_THREAD=false`` keeps its mode, and a query whose call took another
    Py4J connection than its tag's ran untagged, uncancelled by a Ctrl-C (here 200 s).
    There every job of the context is cancelled, as PySpark's own Ctrl-C handler does."""
    done = _run_python(CALLER_UNPINNED_PROBE, cwd=tmp_path, timeout=120)
    lines = done.stdout.splitlines()
    assert "GATEWAY JavaGateway" in lines and "THE CALLER'S True" in lines, done.stdout
    raised = [line for line in lines if line.startswith("RAISED AFTER ")]
    assert raised and float(raised[0].rsplit(" ", 1)[1]) < 10, done.stdout
    assert "JOBS LEFT []" in lines


@pytest.mark.slow
def test_a_ctrl_c_cancels_a_spark_connect_query_at_once(
    connect_server: str, tmp_path: Path
) -> None:
    """On Spark Connect too: a SIGINT during a query of minutes is raised within seconds
    (the session's operation tag is interrupted), through the Arrow collect and a collect
    of rows, and between two queries of a step; the server's two cores are free at once
    after it (a query left running would hold them for a minute and more). In its own
    process: the signal goes to its main thread, and a Connect client marks its whole
    process as remote."""
    lines = _ctrl_c_probe(connect_server, tmp_path, timeout=180)
    for name in ("toArrow", "collect", "between"):
        free = [line for line in lines if line.startswith(f"{name} CORES FREE AFTER ")]
        assert free and float(free[0].rsplit(" ", 1)[1]) < 30, lines


def test_an_unreachable_connect_server_is_an_error_at_once() -> None:
    """The Connect client retries a closed port for about 20 minutes per query (a review's
    run took an hour to fail): nothing listening is an error in seconds."""
    from gate.engines.spark_session import start_session
    from gate.errors import EngineError

    port = _free_port()
    started = time.perf_counter()
    with pytest.raises(EngineError, match=rf"no Spark Connect server answers at 127.0.0.1:{port}"):
        start_session(f"sc://127.0.0.1:{port}", {})
    assert time.perf_counter() - started < 30


@pytest.mark.parametrize(
    ("where", "master"),
    [("--spark-master", "foo"), ("--spark-master", "local[0]"), ("policy", "spark://")],
)
def test_a_master_spark_cannot_parse_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str, master: str
) -> None:
    """Exit 2 before anything is read (it had been exit 3 after loading the bundle, with
    PySpark's JAVA_GATEWAY_EXITED twice, once per audit)."""
    from gate.cli import main

    text = "version: 1\nname: t\naudits:\n  disclosure:\n    features: [{class: ngram}]\n"
    text += "    thresholds: {max_epsilon: 1}\n"
    if where == "policy":
        text += f"engine: {{name: spark, spark_master: '{master}'}}\n"
    policy = tmp_path / "p.yaml"
    policy.write_text(text)
    args = ["policy", "validate", str(policy)]
    if where == "--spark-master":
        args = [
            "check",
            "--policy",
            str(policy),
            "--synthetic",
            str(EXAMPLE / "synthetic.jsonl"),
            "--manifest",
            str(EXAMPLE / "split" / "split-manifest.json"),
            "--engine",
            "spark",
            "--spark-master",
            master,
            "--no-mlflow",
            "--out",
            str(tmp_path / "out"),
        ]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"found {master!r}" in err
    assert (
        ("--spark-master" in err) if where == "--spark-master" else ("engine.spark_master" in err)
    )


def test_a_failing_close_never_replaces_the_error_in_flight() -> None:
    """Every engine: leaving its block with an error keeps that error (a Spark session
    whose stop failed after a signal had reported the stop's error); a clean exit raises
    the close's own."""
    from gate.engines.local import LocalEngine

    class BrokenClose(LocalEngine):
        """The local engine, whose close fails."""

        def close(self) -> None:
            raise RuntimeError("stop failed")

    with pytest.raises(ValueError, match="the real error"), BrokenClose(EngineSettings()):
        raise ValueError("the real error")
    with (
        pytest.raises(RuntimeError, match="stop failed"),
        BrokenClose(EngineSettings()) as engine,
    ):
        assert engine.settings == EngineSettings()
