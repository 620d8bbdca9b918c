"""Third-party plug-ins: a package registered through entry points, installed with pip,
extends the policy schema and is gated with; its metrics reach the checks, the GX suite,
report.json, the HTML report, JUnit, the plots and MLflow without any code in gate.

The package is ``tests/plugins/gate-copies-plugin`` (an audit ``copies`` and a disclosure
class ``digits``). It is installed into a directory of its own (``pip install --target``)
that the gate processes under test put on ``PYTHONPATH``, so the test venv stays as it was.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gate.registry import PluginUnavailableError, Registry

from .conftest import REPO, check_args, unique_text, write_jsonl, write_policy

PLUGIN = REPO / "tests" / "plugins" / "gate-copies-plugin"
GATE = [sys.executable, "-m", "gate"]

POLICY = """\
version: 1
name: plugin
seed: 3
audits:
  disclosure:
    features:
      - {class: ngram, n_min: 3, n_max: 4}
      - {class: digits, min_digits: 6}
    thresholds: {max_epsilon: 0.5}
  membership:
    scorers: [ngram, {scorer: digits, features: {class: digits, min_digits: 6}}]
    thresholds: {max_auc: 0.99}
  copies:
    min_characters: 10
    thresholds: {max_train_copies: 0, max_epsilon: 0.5}
"""


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site")
    source = tmp_path_factory.mktemp("src") / PLUGIN.name  # the build leaves files behind
    shutil.copytree(PLUGIN, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--no-build-isolation",
            "--target",
            str(target),
            str(source),
        ],
        check=True,
        capture_output=True,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    assert list(target.glob("gate_copies_plugin-*.dist-info/entry_points.txt"))
    return target


def gate(plugin_path: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(plugin_path), "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [*GATE, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture
def leaky(tmp_path: Path) -> dict[str, Path]:
    """20 train and 20 holdout users, each record with its own order number; the release
    copies 8 train records verbatim."""

    def text(i: int) -> str:
        return f"{unique_text(i)} order {700000 + i}"

    train = [{"user_id": f"t{i}", "text": text(i)} for i in range(20)]
    holdout = [{"user_id": f"h{i}", "text": text(100 + i)} for i in range(20)]
    return {
        "train": write_jsonl(tmp_path / "train.jsonl", train),
        "holdout": write_jsonl(tmp_path / "holdout.jsonl", holdout),
        "synthetic": write_jsonl(tmp_path / "s.jsonl", [{"text": text(i)} for i in range(8)]),
        "policy": write_policy(tmp_path / "policy.yaml", POLICY),
    }


def test_the_schema_shows_installed_plugins(plugin_path: Path, tmp_path: Path) -> None:
    with_plugin = json.loads(gate(plugin_path, "policy", "schema", cwd=tmp_path).stdout)
    audits = with_plugin["$defs"]["Audits"]["properties"]
    assert "copies" in audits and "CopiesConfig" in with_plugin["$defs"]
    assert "DigitsFeatures" in with_plugin["$defs"] and "DigitsScorerConfig" in with_plugin["$defs"]
    plain = json.loads(gate(Path("/nonexistent"), "policy", "schema", cwd=tmp_path).stdout)
    assert "copies" not in plain["$defs"]["Audits"]["properties"]


def test_plugin_is_listed(plugin_path: Path, tmp_path: Path) -> None:
    listed = gate(plugin_path, "audits", cwd=tmp_path)
    assert listed.returncode == 0 and "copies" in listed.stdout.split()
    assert "rewrite attacks: embedding judge lexical" in listed.stdout.splitlines()
    assert "copies" not in gate(Path("/nonexistent"), "audits", cwd=tmp_path).stdout.split()


def test_gating_with_a_plugin_reaches_every_kind_of_evidence(
    plugin_path: Path, leaky: dict[str, Path], tmp_path: Path
) -> None:
    import mlflow

    out = tmp_path / "out"
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run = gate(plugin_path, *check_args(leaky, out, "--tracking-uri", store), cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    report = json.loads((out / "report.json").read_text())
    copies = report["audits"]["copies"]
    assert copies["status"] == "fail"
    assert copies["metrics"]["train_copies"] == 8 and copies["metrics"]["holdout_copies"] == 0
    assert copies["metrics"]["epsilon_lower"] > 0.5
    assert copies["metric_specs"]["epsilon_lower"]["kind"] == "epsilon"
    assert [c["metric"] for c in copies["checks"]] == ["train_copies", "epsilon_lower"]
    assert all(c["passed"] is False for c in copies["checks"])
    assert "copies" in copies["statements"]
    digits = report["audits"]["disclosure"]["metrics"]
    assert digits["digits.train_disclosures"] == 8 and digits["digits.holdout_disclosures"] == 0
    assert any(w["class"] == "digits" for w in report["audits"]["disclosure"]["witnesses"])
    membership = report["audits"]["membership"]
    assert membership["metrics"]["digits.auc"] == pytest.approx(0.7)  # 8 of 20 train users
    assert "digits.auc" in [c["metric"] for c in membership["checks"]]

    suite = json.loads((out / "gx-suite.json").read_text())
    columns = {e["kwargs"]["column"] for e in suite["expectations"]}
    assert {
        "copies__train_copies",
        "copies__epsilon_lower",
        "disclosure__digits_epsilon_lower_exact",
    } <= columns
    html = (out / "report.html").read_text()
    assert "Audit <code>copies</code>" in html and "train users with a record copied" in html
    junit = (out / "junit.xml").read_text()
    assert 'name="train_copies &lt;= 0"' in junit and "gate.copies" in junit
    assert (out / "plots" / "copies-train-vs-holdout.png").exists()
    assert "plots/epsilon.png" in report["evidence"]["plots"]

    client = mlflow.MlflowClient(tracking_uri=store)
    parent = client.get_run(report["evidence"]["mlflow_run_id"])
    assert parent.data.metrics["copies.train_copies"] == 8
    nested = client.search_runs(
        [parent.info.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'"
    )
    by_name = {r.data.tags["gate.audit"]: r for r in nested}
    assert by_name["copies"].data.metrics["epsilon_lower"] > 0.5
    specs = client.download_artifacts(
        by_name["copies"].info.run_id, "metric_specs.json", str(tmp_path)
    )
    assert json.loads(Path(specs).read_text())["train_copies"]["kind"] == "count"


def test_a_plugin_config_is_validated_like_a_builtin(
    plugin_path: Path, leaky: dict[str, Path], tmp_path: Path
) -> None:
    write_policy(leaky["policy"], POLICY.replace("min_characters: 10", "min_characters: 0"))
    run = gate(plugin_path, "policy", "validate", str(leaky["policy"]), cwd=tmp_path)
    assert run.returncode == 2
    assert (
        "policy.yaml:14: audits.copies.min_characters: Input should be greater than or equal to 1; found 0"
        in run.stderr
    )
    write_policy(leaky["policy"], POLICY.replace("min_digits: 6", "min_digit: 6"))
    run = gate(plugin_path, "policy", "validate", str(leaky["policy"]), cwd=tmp_path)
    assert (
        run.returncode == 2 and "audits.disclosure.features[1].min_digit: unknown key" in run.stderr
    )


def test_without_the_plugin_its_names_are_unknown_keys(
    leaky: dict[str, Path], tmp_path: Path
) -> None:
    run = gate(Path("/nonexistent"), "policy", "validate", str(leaky["policy"]), cwd=tmp_path)
    assert run.returncode == 2
    assert "audits.disclosure.features[1]: unknown class 'digits'" in run.stderr
    assert "audits.copies: unknown key" in run.stderr
    assert "audits.membership.scorers[1]: unknown scorer 'digits'" in run.stderr


def test_registry_names_loads_and_refuses() -> None:
    registry: Registry[object] = Registry("widget", group="gate.test-widgets", builtins={})
    marker = object()
    assert registry.register("one")(marker) is marker
    assert registry.get("one") is marker and registry.names() == ["one"]
    with pytest.raises(ValueError, match="a widget named 'one' is already registered"):
        registry.register("one")(object())
    with pytest.raises(
        PluginUnavailableError, match=r"widget 'two' is not available .*available: one"
    ):
        registry.get("two")


def test_a_builtin_whose_package_is_missing_names_the_extra() -> None:
    registry: Registry[object] = Registry(
        "widget", group="gate.test-widgets", builtins={"heavy": "gate_no_such_module"}
    )
    with pytest.raises(
        PluginUnavailableError, match="widget 'heavy' needs a package that is not installed"
    ):
        registry.get("heavy")


def test_a_plugin_named_like_a_loaded_builtin_is_refused(tmp_path: Path) -> None:
    """The built-in module registers ngram, pii and semantic at once: a package's ``pii``
    was ignored once ``ngram`` had loaded that module (the built-in ran in its place)."""
    site = tmp_path / "site"
    dist = site / "clash_plugin-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: clash-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[gate.disclosure_classes]\npii = clash_plugin.detect:MyPii\n"
    )
    run = gate(site, "policy", "validate", str(REPO / "policies" / "standard.yaml"), cwd=tmp_path)
    assert run.returncode == 3, run.stderr
    assert (
        "disclosure class 'pii': the entry point 'clash_plugin.detect:MyPii' in group "
        "'gate.disclosure_classes' uses the name of a built-in disclosure class" in run.stderr
    )
