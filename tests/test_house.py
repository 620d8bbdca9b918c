"""The extension points on tiny hand-made inputs: typed metrics, result types, the feature
store, scorers sharing the disclosure audit's settings, and checks on declared metrics."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import ClassVar, Literal

import numpy as np
import pandas as pd
import pytest
from pydantic import ConfigDict, Field

from gate.api import run_gate, split_warnings
from gate.audits.disclosure import METRICS as DISCLOSURE_METRICS
from gate.audits.disclosure import DisclosureAuditRunner
from gate.audits.feature_store import (
    ClassDisclosures,
    DisclosureClass,
    FeatureStore,
    WitnessCandidates,
)
from gate.audits.membership import MembershipScorer
from gate.audits.registry import audit_checks, create_audit, policy_checks
from gate.data.bundle import load_bundle
from gate.errors import BundleError, InputError, PolicyError
from gate.generators import resolve_generator
from gate.generators.base import GeneratorConfig
from gate.metrics import Metric, MetricSet, MetricSpec
from gate.plugins import AUDITS, DISCLOSURE_CLASSES, MEMBERSHIP_SCORERS
from gate.policy import load_policy, parse_policy
from gate.policy.checks import CheckSpec
from gate.policy.models import (
    AuditConfig,
    FeatureClassConfig,
    MembershipPolicy,
    ScorerConfig,
    ThresholdModel,
)
from gate.progress import NullProgress
from gate.registry import PluginUnavailableError, Registry
from gate.results import AuditResult

from .conftest import REPO
from .fake_generators import EchoGenerator

A = MetricSpec("a", "first", "higher", "hand", kind="count")
B = MetricSpec("b", "second", "lower", "hand", kind="p_value")


def test_metric_names_with_and_without_subject() -> None:
    assert Metric(A, 1.0).name == "a" and Metric(A, 1.0, "ngram").name == "ngram.a"


def test_metric_set_keeps_declaration_order_and_refuses_undeclared_names() -> None:
    metrics = MetricSet([A, B])
    assert [m.name for m in metrics.values("x", {"b": 2, "a": 1})] == ["x.a", "x.b"]
    with pytest.raises(
        KeyError, match=r"metrics \['c'\] are not declared \(declared: \['a', 'b'\]\)"
    ):
        metrics.values(None, {"c": 1.0})
    with pytest.raises(KeyError, match="metric 'c' is not declared"):
        metrics["c"]
    with pytest.raises(ValueError, match="metric 'a' is declared twice"):
        MetricSet([A, A])


def test_an_audit_result_refuses_a_metric_reported_twice() -> None:
    with pytest.raises(ValueError, match="reported a metric twice"):
        AuditResult(metrics=(Metric(A, 1.0, "x"), Metric(A, 2.0, "x")))
    result = AuditResult(metrics=(Metric(A, 1.0, "x"), Metric(B, 0.5, "y"), Metric(A, 3.0, "y")))
    assert result.metric_values == {"x.a": 1.0, "y.b": 0.5, "y.a": 3.0}
    assert result.subjects() == ["x", "y"]


def test_a_check_on_an_undeclared_metric_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken(DisclosureAuditRunner):
        def checks(self, config):
            return [CheckSpec.at_most("disclosure", A, None, 1.0, "not a disclosure metric")]

    monkeypatch.setitem(AUDITS._loaded, "disclosure", Broken)
    policy = parse_policy(
        "version: 1\nname: t\naudits:\n  disclosure:\n    features: [{class: ngram}]\n"
        "    thresholds: {max_epsilon: 0.5}\n"
    )
    with pytest.raises(
        PluginUnavailableError, match="checks metric 'a', which it does not declare"
    ):
        audit_checks("disclosure", policy.audits.disclosure)


def test_every_builtin_check_gates_a_declared_metric_with_its_estimator() -> None:
    for path in sorted((REPO / "policies").glob("*.yaml")):
        for check in policy_checks(load_policy(path).policy):
            assert check.spec.estimator and check.spec.meaning, check.metric
            if check.audit == "disclosure":
                assert DISCLOSURE_METRICS[check.spec.name] is check.spec


def test_scorers_share_the_disclosure_audit_settings() -> None:
    policy = load_policy(REPO / "policies" / "standard.yaml").policy
    classes = {f.feature_class: f for f in policy.audits.disclosure.features}
    scorers = {s.scorer: s for s in policy.audits.membership.scorers}
    assert scorers["ngram"].features == classes["ngram"]
    assert scorers["pii"].features == classes["pii"]
    assert scorers["embedding"].features == classes["semantic"]


def test_semantic_settings_reach_the_embedding_scorer(tmp_path: Path) -> None:
    policy = parse_policy(
        f"""\
version: 1
name: t
audits:
  disclosure:
    features: [{{class: semantic, model: {tmp_path}, batch_size: 8, cache_dir: {tmp_path}, neighbours: 3}}]
    thresholds: {{max_epsilon: 0.5}}
  membership:
    scorers: [{{scorer: embedding, top_k: 2}}, {{scorer: ngram, features: {{n_min: 2, n_max: 3}}}}]
    thresholds: {{max_auc: 0.6}}
"""
    )
    embedding, ngram = policy.audits.membership.scorers
    assert embedding.features.model == str(tmp_path) and embedding.features.batch_size == 8
    assert embedding.features.cache_dir == str(tmp_path) and embedding.features.neighbours == 3
    assert (ngram.features.n_min, ngram.features.n_max) == (2, 3)  # its own, kept


def bundle_of(files: dict[str, Path]):
    return load_bundle(
        membership=MembershipPolicy(),
        train=files["train"],
        holdout=files["holdout"],
        synthetic=files["synthetic"],
    )


class CountedFeatures(FeatureClassConfig):
    feature_class: Literal["counted"] = Field("counted", alias="class")
    weight: int = 1


class CountedClass(DisclosureClass[CountedFeatures]):
    """Every user discloses ``weight`` features; counts its own computations."""

    name = "counted"
    config_model = CountedFeatures
    computed: ClassVar[list[int]] = []

    def disclosures(self, bundle, config, store) -> ClassDisclosures:
        self.computed.append(config.weight)
        users = int(bundle.user_codes.max()) + 1
        empty = np.zeros(0, dtype=np.int64)
        return ClassDisclosures(
            feature_class="counted",
            rare_features=users,
            disclosed_features=users,
            record_counts=np.full(len(bundle.source), config.weight),
            user_counts=np.full(users, config.weight),
            candidates=WitnessCandidates(empty, empty, empty.astype(float), str),
        )


def test_the_feature_store_computes_each_configuration_once(
    bundle_files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(DISCLOSURE_CLASSES._loaded, "counted", CountedClass)
    CountedClass.computed.clear()
    bundle = bundle_of(bundle_files)
    store = FeatureStore(bundle, NullProgress())
    first = store.disclosures(CountedFeatures())
    assert store.disclosures(CountedFeatures()) is first
    assert store.disclosures(CountedFeatures(weight=2)).user_counts[0] == 2
    assert CountedClass.computed == [1, 2]


class FailingClass(CountedClass):
    """Fails as a Spark job that lost a worker does; counts its attempts."""

    def disclosures(self, bundle, config, store) -> ClassDisclosures:
        self.computed.append(config.weight)
        raise RuntimeError("the job failed")


def test_the_feature_store_fails_a_failed_configuration_again_at_once(
    bundle_files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review: the membership audit re-ran the disclosure audit's failed n-gram job,
    doubling the time to fail."""
    monkeypatch.setitem(DISCLOSURE_CLASSES._loaded, "counted", FailingClass)
    CountedClass.computed.clear()
    store = FeatureStore(bundle_of(bundle_files), NullProgress())
    for _ in range(2):
        with pytest.raises(RuntimeError, match="the job failed"):
            store.disclosures(CountedFeatures())
    assert CountedClass.computed == [1]


def test_an_in_process_class_is_gated_like_a_builtin(
    bundle_files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Equal counts on train and holdout users: zero learning is not rejected."""
    monkeypatch.setitem(DISCLOSURE_CLASSES._loaded, "counted", CountedClass)
    policy = parse_policy(
        "version: 1\nname: t\naudits:\n  disclosure:\n    features: [{class: counted, weight: 3}]\n"
        "    thresholds: {max_epsilon: 0.5}\n"
    )
    bundle = bundle_of(bundle_files)
    result = run_gate(policy, bundle)
    metrics = result.audits["disclosure"].result.metric_values
    assert (
        metrics["counted.train_disclosures"] == 60 and metrics["counted.holdout_disclosures"] == 60
    )
    assert metrics["counted.epsilon_lower_exact"] == 0 and result.status == "pass"


class CheatScorerConfig(ScorerConfig):
    scorer: Literal["cheat"] = "cheat"


class CheatScorer(MembershipScorer[CheatScorerConfig]):
    """Separates train from holdout perfectly, then tries to report its own AUC."""

    name = "cheat"
    config_model = CheatScorerConfig
    extra_metrics = (MetricSpec("auc", "a friendlier AUC", "higher", "none"),)

    def user_scores(self, bundle, config, store):
        return bundle.user_is_train.astype(float)

    def extra(self, bundle, config, store, *, rng):
        return {"auc": 0.5}


def test_a_scorer_cannot_replace_the_audits_own_metrics(
    bundle_files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(MEMBERSHIP_SCORERS._loaded, "cheat", CheatScorer)
    policy = parse_policy(
        "version: 1\nname: t\naudits:\n  membership:\n    scorers: [cheat]\n"
        "    thresholds: {max_auc: 0.9}\n"
    )
    bundle = bundle_of(bundle_files)
    result = run_gate(policy, bundle)
    assert result.status == "error"
    assert "collides with a metric of the audit" in result.audits["membership"].error


def test_a_bundle_loaded_for_another_p_is_refused(bundle_files: dict[str, Path]) -> None:
    bundle = bundle_of(bundle_files)
    with pytest.raises(BundleError, match=r"loaded for membership p = 0.5 .* policy says p = 0.1"):
        split_warnings(bundle, MembershipPolicy(p=0.1))


def test_a_bundle_loaded_with_other_text_settings_is_refused(
    bundle_files: dict[str, Path],
) -> None:
    """A library caller who loads the bundle without the policy's text settings would
    have the release read as the policy does not (HTML left unread under ``markup:
    html``): ``run_gate`` refuses it, naming each setting that differs."""
    bundle = bundle_of(bundle_files)
    policy = parse_policy(
        "version: 1\nname: t\ntext: {markup: html, casefold: true}\naudits:\n  disclosure:\n"
        "    features: [{class: ngram, n_min: 3, n_max: 5}]\n"
        "    thresholds: {max_epsilon: 0.5}\n"
    )
    with pytest.raises(BundleError) as refused:
        run_gate(policy, bundle)
    assert str(refused.value).count(" in the policy") == 2
    assert "text.markup: 'none' in the bundle, 'html' in the policy" in str(refused.value)
    assert "text.casefold: False in the bundle, True in the policy" in str(refused.value)


def test_the_release_is_read_again_only_for_a_class_that_reads_it(
    bundle_files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The release's other readings (seconds on real-length text) are made when the n-gram
    class first asks for them, not by the load: a policy without that class does not pay
    for them."""
    monkeypatch.setitem(DISCLOSURE_CLASSES._loaded, "counted", CountedClass)
    bundle = bundle_of(bundle_files)
    assert bundle.release_written is not None and "release_other_readings" not in vars(bundle)
    counted = parse_policy(
        "version: 1\nname: t\naudits:\n  disclosure:\n    features: [{class: counted}]\n"
        "    thresholds: {max_epsilon: 0.5}\n"
    )
    run_gate(counted, bundle)
    assert "release_other_readings" not in vars(bundle)
    ngram = parse_policy(
        "version: 1\nname: t\naudits:\n  disclosure:\n"
        "    features: [{class: ngram, n_min: 3, n_max: 5}]\n"
        "    thresholds: {max_epsilon: 0.5}\n"
    )
    run_gate(ngram, bundle)
    assert isinstance(vars(bundle)["release_other_readings"], pd.Series)  # made (None: not)
    with pytest.raises(ValueError, match="release_written: the release as written is needed"):
        replace(bundle, release_written=None)
    with pytest.raises(
        ValueError, match="must hold the release's 5 rows, in its index; found 10 rows"
    ):
        replace(bundle, synthetic=bundle.synthetic.iloc[:5])


def test_thresholds_without_checks_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    class Silent(DisclosureAuditRunner):
        def checks(self, config):
            return []

    monkeypatch.setitem(AUDITS._loaded, "disclosure", Silent)
    policy = parse_policy(
        "version: 1\nname: t\naudits:\n  disclosure:\n    features: [{class: ngram}]\n"
        "    thresholds: {max_epsilon: 0.5}\n"
    )
    with pytest.raises(PluginUnavailableError, match="sets thresholds but its checks"):
        audit_checks("disclosure", policy.audits.disclosure)


class LaxThresholds(ThresholdModel):
    model_config = ConfigDict(extra="allow")
    max_weight: float | None = None


class LaxFeatures(FeatureClassConfig):
    feature_class: Literal["lax"] = Field("lax", alias="class")
    limits: LaxThresholds | None = None


class LaxClass(CountedClass):
    name = "lax"
    config_model = LaxFeatures


class InfiniteCopiesConfig(AuditConfig):
    model_config = ConfigDict(allow_inf_nan=True)


class InfiniteCopiesAudit(DisclosureAuditRunner):
    config_model = InfiniteCopiesConfig  # type: ignore[assignment]


def test_plugin_settings_laxer_than_the_policys_are_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A plug-in's settings that accept unknown keys would drop a misspelled threshold
    (a check that gates nothing); .inf/.nan thresholds could never fail. A nested model
    is found too."""
    assert LaxThresholds.model_validate({"max_wieght": 1}).max_weight is None  # the hazard
    monkeypatch.setitem(DISCLOSURE_CLASSES._loaded, "lax", LaxClass)
    with pytest.raises(PluginUnavailableError, match=r"class 'lax': .*LaxThresholds \(extra="):
        parse_policy(
            "version: 1\nname: t\naudits:\n  disclosure:\n    features: [{class: lax}]\n"
            "    thresholds: {max_epsilon: 0.5}\n"
        )
    monkeypatch.setitem(AUDITS._loaded, "infinite", InfiniteCopiesAudit)
    with pytest.raises(PluginUnavailableError, match=r"audit 'infinite': .*allow_inf_nan=True"):
        create_audit("infinite")
    with pytest.raises(InputError, match=r"generator 'tests.test_house:LaxGenerator': .*Lax"):
        resolve_generator("tests.test_house:LaxGenerator")


class LaxGeneratorConfig(GeneratorConfig):
    model_config = ConfigDict(extra="ignore")


class LaxGenerator(EchoGenerator):
    config_model = LaxGeneratorConfig  # type: ignore[assignment]


def test_a_registered_name_must_match_the_plugins_own() -> None:
    registry: Registry[object] = Registry("widget", group="gate.test-widgets", builtins={})
    with pytest.raises(ValueError, match="declares name 'counted' but is registered as 'other'"):
        registry.register("other")(CountedClass)


class UntaggedFeatures(FeatureClassConfig):
    weight: int = 1


class UntaggedClass(CountedClass):
    name = "untagged"
    config_model = UntaggedFeatures


@pytest.mark.parametrize(
    ("features", "message"),
    [
        ("[{class: [ngram]}]", "features[0]"),  # not a name: a plain schema error
        ("[{class: untagged}]", "its config_model's 'feature_class' field must be Literal"),
    ],
)
def test_malformed_class_names_and_plugins_get_a_message(
    features: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(DISCLOSURE_CLASSES._loaded, "untagged", UntaggedClass)
    text = (
        "version: 1\nname: t\naudits:\n  disclosure:\n"
        f"    features: {features}\n    thresholds: {{max_epsilon: 0.5}}\n"
    )
    with pytest.raises((PolicyError, PluginUnavailableError), match=re.escape(message)):
        parse_policy(text)
