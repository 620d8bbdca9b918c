"""What is checked before any work, and the warnings a run carries: the engine the
command line names, the one audit ``gate canary`` runs, generators and PII entity types
only a library can check, inputs an enabled audit needs (canary source, ``source_id``),
and warnings about the split, unused caches and emulated bfloat16.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ValidationError

from gate.data.bundle import Bundle
from gate.data.markup import share_with_markup
from gate.data.training_data import CONTAINED_WORDS, DISTINCTIVE_WORDS, TrainingDataCheck
from gate.engines.base import uses_feature_caches
from gate.errors import BundleError, InputError, SettingError
from gate.features.embeddings import native_bfloat16
from gate.features.tokenize import long_word_share
from gate.plugins import ENGINES
from gate.policy.loader import LoadedPolicy, policy_location
from gate.policy.models import (
    EngineSettings,
    MembershipPolicy,
    PiiFeatures,
    Policy,
    SemanticFeatures,
    TextPolicy,
)
from gate.registry import PluginUnavailableError
from gate.stats.split_balance import train_share_interval

if TYPE_CHECKING:
    import pandas as pd


FUSED_WORD = 30  # characters: a word longer than this is words run together
FUSED_RELEASE_SHARE = 0.5  # of the release's characters in such words: warned of
FUSED_SOURCE_SHARE = 0.1  # ... when the source's is below this (a language without spaces)


def refuse_a_starting_worker(call: str) -> None:
    """Stops a PII worker that is starting when it calls ``call``: a script that calls
    the gate at its top level, which each spawned worker re-runs as it imports the
    script. Unstopped, each worker ran a whole second gate, printed its own result and
    the standard library's error for a pool started there, and the script's gate went on
    (a review). The worker ends here with one line on its standard error, and the
    script's gate, which lost its worker, ends in an error that says to add the guard.
    Other processes that are starting (a ``multiprocessing.Pool`` of the script's own)
    are left to run the call: stopped, a pool starts their like again without end (a
    review).

    Raises:
        SystemExit: in a PII worker that is starting (multiprocessing's own test for a
            pool started there, ``_inheriting``, and the name the gate starts its
            workers with), with the message (printed without a traceback: the worker
            cannot go on, and a handler of ``Exception`` in the script must not keep it
            going).
    """
    # A process that multiprocessing starts has imported it before anything else; the
    # gate's own start-up does not need it (10 ms) nor the PII module (20-35 ms).
    multiprocessing = sys.modules.get("multiprocessing")
    process = None if multiprocessing is None else multiprocessing.current_process()
    if process is None or not getattr(process, "_inheriting", False):
        return
    from gate.features.pii import WORKER_NAME

    if process.name == WORKER_NAME:
        raise SystemExit(
            f"gate: error: {call} was called while a worker process was starting: a script "
            "that calls the gate at its top level is run again by each worker the gate "
            'spawns; call it under `if __name__ == "__main__":`'
        )


def fused_text_warnings(bundle: Bundle) -> tuple[str, ...]:
    """A warning when most of the release's text runs words together while the source's
    does not: a copy whose spaces are deleted matches no n-gram, PII span or embedding of
    the records it copies, and passed (a review); one whose spaces are replaced by
    punctuation or invisible characters is matched by the n-gram class's other readings
    (``text.read_joined_words``) only. The gate cannot read such text in full, so it says so.
    """
    if bundle.synthetic is None or bundle.synthetic.empty:
        return ()
    release = long_word_share(bundle.synthetic["text"], longer_than=FUSED_WORD)
    if release < FUSED_RELEASE_SHARE:
        return ()
    source = long_word_share(bundle.source["text"], longer_than=FUSED_WORD)
    if source >= FUSED_SOURCE_SHARE:
        return ()
    hidden_from = (
        "the n-gram, PII and semantic classes (text.read_joined_words: false)"
        if not bundle.text.read_joined_words
        else "the PII and semantic classes (the n-gram class reads punctuation and "
        "invisible characters that join words as spaces, and splits a run of letters and "
        "digits into the source's words where they explain it)"
    )
    return (
        f"{release:.0%} of the release's text is in words of more than {FUSED_WORD} "
        f"characters ({source:.0%} of the source's): words run together hide copied text "
        f"from {hidden_from}, so their counts may miss what the release copies",
    )


def markup_warnings(bundle: Bundle) -> tuple[str, ...]:
    """A warning when, under ``text.markup: none``, more of the release's records hold
    HTML (character references or formatting tags) than the source's: read as written,
    ``Jill&nbsp;Rose``, ``775&#8209;568&#8209;2052`` or ``<b>Jill</b> Rose`` match no
    n-gram, PII value or embedding of the plain text they copy (a review passed such a
    release); ``text.markup: html`` reads them as a browser shows them."""
    if bundle.text.markup != "none" or bundle.synthetic is None or bundle.synthetic.empty:
        return ()
    release = share_with_markup(bundle.synthetic["text"])
    source = share_with_markup(bundle.source["text"])
    if release == 0 or release <= source:
        return ()
    return (
        f"{release:.0%} of the release's records hold HTML markup (character references "
        f"such as &nbsp; or formatting tags; {source:.0%} of the source's), read as written "
        "under text.markup: none, where it hides copied text and PII from every class; set "
        "text.markup: html if the release is HTML",
    )


def require_text_settings(bundle: Bundle, text: TextPolicy) -> None:
    """Refuse a bundle whose texts were read with other ``text`` settings than the
    policy's: its audits would read the release as the policy does not (a copy in HTML
    under ``markup: html``, or one whose spaces were deleted, passing unread).

    Raises:
        BundleError: the settings differ; the message names each one.
    """
    if bundle.text == text:
        return
    loaded, wanted = bundle.text.model_dump(), text.model_dump()
    differ = "; ".join(
        f"text.{name}: {loaded[name]!r} in the bundle, {wanted[name]!r} in the policy"
        for name in wanted
        if loaded[name] != wanted[name]
    )
    raise BundleError(
        f"the bundle was loaded with other text settings than the policy's ({differ}); load "
        "it with the policy's (load_bundle(text=policy.text))"
    )


def split_warnings(bundle: Bundle, membership: MembershipPolicy) -> tuple[str, ...]:
    """Decide what a split far from the declared ``p`` means under the policy's
    ``membership.split_check.action``: an input error (``fail``) or a warning (``warn``);
    a split without a manifest is a warning too. A declared split whose p is an interval
    (:func:`with_declared_p_interval`) is not compared with ``membership.p``.

    Raises:
        BundleError: the split is inconsistent with ``p`` and the action is ``fail``.
    """
    if bundle.membership.p != membership.p or (
        bundle.membership.balance_alpha != membership.split_check.alpha
    ):
        raise BundleError(
            f"the bundle was loaded for membership p = {bundle.membership.p:g} (split check "
            f"alpha {bundle.membership.balance_alpha:g}) but the policy says p = "
            f"{membership.p:g} (alpha {membership.split_check.alpha:g}); load it with the "
            "policy's membership settings"
        )
    found: tuple[str, ...] = ()
    share = bundle.membership.p_interval
    if share is not None:
        found += (
            "the split is declared (train and holdout files without a `gate split` manifest) "
            "and membership.declared_split.p is interval: every confidence statement holds "
            f"for each p in [{share.low:.4f}, {share.high:.4f}], a Clopper-Pearson interval "
            f"of the train share ({share.train_users} of {share.total_users} users) at "
            f"1 - {share.gamma:g}, and assumes that users went to train independently with "
            "one such p, which a hand-picked split (by date, by customer) voids; make the "
            "split with `gate split` and give --manifest",
        )
    elif bundle.membership.how == "declared":  # a review: nothing said so
        found += (
            "the split is declared (train and holdout files without a `gate split` manifest): "
            f"every confidence statement assumes that each user went to train independently "
            f"with probability p = {membership.p:g}, which a hand-picked split (by date, by "
            "customer) voids, and a random split drawn with another p too (the split check "
            "lets small differences through: with 1,000 users a train share drawn at 0.52 "
            "for p = 0.5 passes it, and a release that leaks nothing then fails about 12 % "
            "of the time at alpha = 0.05); make the split with `gate split` and give "
            "--manifest, or set membership.declared_split.p: interval",
        )
    if bundle.membership.balance_ok or share is not None:  # the interval replaces p
        return found
    if membership.split_check.action == "fail":
        raise BundleError(bundle.membership.imbalance_message())
    return (*found, bundle.membership.imbalance_message())


def training_data_warnings(trained_on: TrainingDataCheck | None) -> tuple[str, ...]:
    """What a user must know of a training-data check that refused nothing: it compared
    nothing the generator saw, or the training data holds holdout-only texts too weak to
    refuse it (short, or several holdout users wrote them)."""
    if trained_on is None:
        return ()
    found: tuple[str, ...] = ()
    if trained_on.saw_nothing_of_train():
        found += (_compared_nothing(trained_on),)
    if trained_on.weak_holdout_records_found:
        found += (
            f"the training data {trained_on.path} holds the text of "
            f"{trained_on.weak_holdout_records_found} of the "
            f"{trained_on.weak_holdout_records} holdout records whose text no train record "
            f"holds but is too weak to refuse it: under {DISTINCTIVE_WORDS} words, or "
            f"written by several holdout users (the first at line "
            f"{trained_on.weak_holdout_first_line}). Such text may come from any public "
            "corpus, so it is not taken as proof that the generator saw a holdout user; if "
            "these rows are holdout records, the split came after training and no statement "
            "of this report holds",
        )
    return found


def refuse_unchecked_training_data(policy: Policy, bundle: Bundle, *, where: str) -> None:
    """Refuse a release gated without the training-data check under a policy that requires
    it (``membership.training_data: required``): the bundle was loaded without
    ``training_data``, or with a file in which the check compared nothing (no text only
    train holds, no train user), which any unrelated file would satisfy."""
    if policy.membership.training_data != "required":
        return
    trained_on = bundle.membership.training_data
    if trained_on is None:
        raise InputError(
            f"{where}: membership.training_data is required, but the bundle was loaded "
            "without the generator's training data (load_bundle(training_data=...), or "
            "--training-data)"
        )
    if trained_on.saw_nothing_of_train():
        raise InputError(
            f"{where}: membership.training_data is required, but " + _compared_nothing(trained_on)
        )


def _compared_nothing(trained_on: TrainingDataCheck) -> str:
    return (
        f"the training data {trained_on.path} holds no text that only train holds"
        + ("" if trained_on.user_column is None else " and no train user")
        + ": the check that it holds no holdout user compared nothing the generator saw; "
        "give each record's text as the split holds it (a `text` column, or a field of a "
        "chat or instruction format; a record inside "
        "a prompt template that the rows share is found at any length, inside other "
        f"longer rows if it has {CONTAINED_WORDS} words or more), and the split's user column"
    )


AUDITS_WITHOUT_P = frozenset({"canary", "distinguishability"})
"""Audits that take no membership p from the split (the canary audit draws its own coin)."""


def with_declared_p_interval(bundle: Bundle, policy: Policy, *, where: str) -> Bundle:
    """``bundle`` with the interval of p its audits take
    (:attr:`gate.data.bundle.Membership.p_interval`) when its split is declared, the
    policy sets ``membership.declared_split.p: interval`` and an enabled audit takes p
    (a plug-in audit is taken to); otherwise ``bundle`` without one.

    Raises:
        InputError: an audit the policy enables needs p = 1/2 known (the one-run bound
            with delta > 0, the profile audit's attacks); ``where`` names the policy.
    """
    settings = policy.membership.declared_split
    if (
        bundle.membership.how != "declared"
        or settings.p != "interval"
        or set(policy.audits.enabled()) <= AUDITS_WITHOUT_P
    ):
        if bundle.membership.p_interval is None:
            return bundle
        return replace(bundle, membership=replace(bundle.membership, p_interval=None))
    needs_half = []
    membership, profile = policy.audits.membership, policy.audits.profile
    if membership is not None and membership.enabled and membership.delta > 0:
        needs_half.append(
            f"audits.membership.delta = {membership.delta:g} (set delta: 0 for the bound "
            "over the interval)"
        )
    if profile is not None and profile.enabled and (profile.scorers or bundle.model_dir):
        needs_half.append(
            "audits.profile's attacks (scorers, --model; set scorers: [] and give no "
            "--model for the n-gram LBF profile alone)"
        )
    if needs_half:
        raise InputError(
            f"{where}: {' and '.join(needs_half)} need membership.p = 0.5 known (their "
            "bounds are derived for p = 1/2), but the split is declared and "
            "membership.declared_split.p is interval; or make the split with `gate split` "
            "and give --manifest"
        )
    b = bundle.membership.balance
    share = train_share_interval(
        train_users=b.train_users,
        total_users=b.total_users,
        gamma=settings.gamma_share * policy.alpha,
    )
    return replace(bundle, membership=replace(bundle.membership, p_interval=share))


def cache_warnings(policy: Policy) -> tuple[str, ...]:
    """A warning when the policy sets a ``cache_dir`` that its engine does not use
    (:attr:`gate.engines.base.Engine.uses_feature_caches`; the spark engine analyses and
    embeds every text on its workers)."""
    settings: list[PiiFeatures | SemanticFeatures] = [
        *policy.settings_of(PiiFeatures),
        *policy.settings_of(SemanticFeatures),
    ]
    classes = sorted({s.feature_class for s in settings if s.cache_dir is not None})
    if not classes or uses_feature_caches(policy.engine):
        return ()
    return (
        f"{' and '.join(classes)} features: cache_dir is not used by the "
        f"{policy.engine.name} engine (it analyses and embeds every text); the cache is "
        "neither read nor written",
    )


def precision_warnings(policy: Policy) -> tuple[str, ...]:
    """A warning when the policy embeds in bfloat16 on a CPU that would emulate it (the
    verdict does not change; the run is several times slower than in float32). Only
    this machine's CPU is asked: a Spark cluster's executors are not."""
    if not any(s.precision == "bfloat16" for s in policy.settings_of(SemanticFeatures)):
        return ()
    engine = policy.engine
    on_this_machine = engine.name == "local" or (
        engine.name == "spark" and engine.spark_master.startswith("local")
    )
    if not on_this_machine:
        return ()
    if native_bfloat16() is not False:
        return ()
    return (
        "semantic features: precision bfloat16 on a CPU without bfloat16 matrix instructions "
        "(AVX512-BF16 or AMX): the encoder emulates it, several times slower than float32 "
        "(5.5-5.8x slower on an AVX2 CPU); use precision: float32 on this machine",
    )


# The score Presidio (or the gate's own recognizer) gives a common written form of each
# type without a context word nearby; above it, such a form is found only beside one.
PLAIN_FORM_SCORES = {
    "PHONE_NUMBER": (0.4, "a phone number"),  # PhoneRecognizer.SCORE
    "EMAIL_ADDRESS": (0.5, "an e-mail address written out (jill at example dot org)"),
    "URL": (0.5, "a URL without its scheme (jill.net/cv)"),  # UrlRecognizer
    "US_SSN": (0.5, "a social security number (123-45-6789)"),  # UsSsnRecognizer
    "IP_ADDRESS": (0.6, "an IP address"),  # IpRecognizer
}


def pii_threshold_warnings(policy: Policy) -> tuple[str, ...]:
    """A warning when a ``pii`` class's ``score_threshold`` is above the score a common
    form of a searched type gets without a context word (:data:`PLAIN_FORM_SCORES`): that
    form is then found only beside a word such as "call" or "website" (and only under the
    spaCy engine, whose lemmas the context needs). A review's release copying every train
    phone number passed at 0.5 (T = 0); URLs without a scheme score 0.5."""
    warnings = []
    for pii in policy.settings_of(PiiFeatures):
        missed = [
            (kind, score, form)
            for kind, (score, form) in PLAIN_FORM_SCORES.items()
            if kind in pii.entities and pii.score_threshold > score
        ]
        if missed:
            forms = "; ".join(f"{form}: {score:g}" for _, score, form in missed)
            warnings.append(
                f"pii features: score_threshold {pii.score_threshold:g} is above the score "
                f"Presidio gives {forms} without a context word nearby, so "
                f"{', '.join(kind for kind, _, _ in missed)} finds only such forms beside a "
                "context word (under engine: spacy) and a release copying the others "
                f"passes; use a score_threshold of at most {min(s for _, s, _ in missed):g}"
            )
    return tuple(warnings)


def _pii_classes(
    node: object, path: tuple[int | str, ...]
) -> Iterator[tuple[tuple[int | str, ...], PiiFeatures]]:
    """Every ``pii`` class configuration in a policy (sub)tree, with its YAML path."""
    if isinstance(node, PiiFeatures):
        yield path, node
    elif isinstance(node, BaseModel):
        for name in type(node).model_fields:
            yield from _pii_classes(getattr(node, name), (*path, name))
    elif isinstance(node, list | tuple):
        for i, item in enumerate(node):
            yield from _pii_classes(item, (*path, i))


def _check_pii_entities(loaded: LoadedPolicy) -> None:
    """Refuse entity types a ``pii`` class of an enabled audit cannot search, before any
    work (Presidio knows its recognizers only once loaded: the policy schema cannot).

    Raises:
        InputError: a type no recognizer of the engine finds, or a spaCy pipeline that is
            not installed; named by YAML path.
    """
    from gate.features.pii import unsearchable_entities

    enabled = loaded.policy.audits.enabled().items()
    found = (found for name, audit in enabled for found in _pii_classes(audit, ("audits", name)))
    for path, config in found:
        try:
            problem = unsearchable_entities(
                engine=config.engine, spacy_model=config.spacy_model, entities=config.entities
            )
        except ModuleNotFoundError as exc:
            at = policy_location(loaded, (*path, "spacy_model"))
            raise InputError(f"{at}: {exc.msg}") from None
        if problem:
            raise InputError(f"{policy_location(loaded, (*path, 'entities'))}: {problem}")


def _check_audit_generators(loaded: LoadedPolicy) -> None:
    """Resolve and validate the generators the enabled audits train (the canary audit's,
    the profile audit's n-gram generator).

    Raises:
        InputError: an unknown generator or settings it rejects, named by the policy
            file's line and YAML path.
    """
    policy = loaded.policy
    try:
        canary = policy.audits.canary
        if canary is not None and canary.enabled:
            from gate.canary.audit import canary_generators

            canary_generators(canary)
        profile = policy.audits.profile
        if (
            profile is not None
            and profile.enabled
            and profile.ngram_lbf.enabled
            and profile.ngram_lbf.generator.enabled
        ):
            from gate.profile.ngram_lbf import profile_generator

            profile_generator(profile.ngram_lbf.generator)
    except SettingError as exc:
        raise InputError(f"{policy_location(loaded, exc.path)}: {exc.detail}") from None


def check_before_work(loaded: LoadedPolicy) -> None:
    """What the policy names that only a library can check (generators and their
    settings, PII entity types): bad input, exit 2, before any file is read or model
    trained. ``gate policy validate`` runs it too.

    Raises:
        InputError: named by YAML path.
    """
    _check_audit_generators(loaded)
    _check_pii_entities(loaded)
    _check_local_workdir(loaded)


def check_remediation_block(loaded: LoadedPolicy) -> tuple[str, ...]:
    """The ``remediation`` block as ``gate remediate`` would read it (its generator and
    that generator's settings), for the commands that do not remediate: a mistake there
    is found when the policy is first used, not when a failed gate starts remediation.

    Returns:
        Notes on what ``gate remediate`` would still refuse (no ``sample_size``).

    Raises:
        InputError: an unknown generator or settings its model rejects, by YAML path.
    """
    if loaded.policy.remediation is None:
        return ()
    from gate.remediation.setup import missing_release_size, remediation_setup

    remediation_setup(loaded, generator=None, method=None, release_size=False)
    missing = missing_release_size(loaded)  # the block may name a canary's generator only
    return () if missing is None else (f"gate remediate would refuse it: {missing}",)


def _check_local_workdir(loaded: LoadedPolicy) -> None:
    """The local engine's ``workdir`` is a directory it can write in (a review's
    ``/etc/hostname`` passed validation and failed the audit once a corpus outgrew
    ``memory_mb``, after the work)."""
    engine = loaded.policy.engine
    if engine.name != "local" or engine.workdir is None:
        return
    workdir = Path(engine.workdir)
    problem = (
        "is not a directory"
        if not workdir.is_dir()
        else "is not a directory this user can write in"
        if not os.access(workdir, os.W_OK | os.X_OK)
        else None
    )
    if problem is not None:
        at = policy_location(loaded, ("engine", "workdir"))
        raise InputError(f"{at}: {engine.workdir} {problem}")


def refuse_unused_canary_source(loaded: LoadedPolicy, canary_source: str | Path | None) -> None:
    """Refuse ``--canary-source`` when no canary audit would use it (as ``--model``
    without the profile audit): the user would believe the canaries audited."""
    canary = loaded.policy.audits.canary
    if canary_source is not None and (canary is None or not canary.enabled):
        raise InputError(
            f"--canary-source {canary_source}: the policy {loaded.path} enables no canary "
            "audit, so the canary source would go unused (enable audits.canary, or leave "
            "the option out)"
        )


def require_training_data(loaded: LoadedPolicy, training_data: str | Path | None) -> None:
    """Refuse a release gated without ``--training-data`` under a policy that requires it
    (``membership.training_data: required``), before any data is read."""
    if training_data is None and loaded.policy.membership.training_data == "required":
        raise InputError(
            f"{policy_location(loaded, ('membership', 'training_data'))}: required: give "
            "the file the release's generator was trained on with --training-data "
            "(training_data= in check_release), which is checked to hold no holdout user"
        )


def refuse_null_control(policy: Policy, *, where: str) -> None:
    """Refuse a canary audit with ``n_rep: 0`` where it would gate a release (``gate
    check``, ``gate remediate``, :func:`gate.api.run_gate` with a release or other
    audits): nothing is planted, so its checks fail a pipeline that leaks no more often
    than one that does not, and its PASS approved releases (a review). ``gate canary``
    runs it, as the null control it is. ``where`` names the policy in the message."""
    canary = policy.audits.canary
    if canary is not None and canary.enabled and canary.n_rep == 0:
        raise InputError(
            f"{where}: audits.canary.n_rep: 0 is the null control (no canary is "
            "planted), whose checks cannot tell a leaking pipeline from a clean one, so it "
            "cannot gate a release; run it with `gate canary`, or set n_rep to 1 or more"
        )


def refuse_release_blind_checks(policy: Policy, *, where: str) -> None:
    """Refuse a policy whose checks all read the source corpus alone (metrics declared
    ``of_release=False``, such as the profile audit's ``max_delta_floor``) where it would
    gate a release: every release, a verbatim copy of train included, would get the same
    verdict (a review's copy PASSed so). ``where`` names the policy in the message."""
    from gate.audits.registry import policy_checks

    try:
        checks = policy_checks(policy)
    except PluginUnavailableError:
        return  # that audit is reported as unavailable (exit 3): the run cannot pass
    if checks and not any(check.spec.of_release for check in checks):
        names = ", ".join(f"{check.audit}: {check.metric}" for check in checks)
        raise InputError(
            f"{where}: every check of the policy ({names}) describes the train corpus, not "
            "the release (the delta floor is its n-gram mechanism's): every release, a copy "
            "of train too, would get the same verdict; add a check that reads the release "
            "(max_delta of the profile audit, another audit)"
        )


def refuse_unused_tracking_uri(
    loaded: LoadedPolicy, tracking_uri: str | None, *, mlflow: bool
) -> None:
    """Refuse ``--tracking-uri`` when nothing would be logged there (``--no-mlflow``, or a
    policy with ``evidence.mlflow.enabled: false``): the user would believe the evidence
    logged (a review: the option was dropped without a word); and a blank one (an unset
    variable), which had logged to ``./mlflow.db`` (another review)."""
    if tracking_uri is None:
        return
    if not tracking_uri.strip():
        raise InputError(f"the tracking URI must name a tracking store; found {tracking_uri!r}")
    if not mlflow:
        raise InputError(
            f"--tracking-uri {tracking_uri}: --no-mlflow logs nothing there; leave one of "
            "the two options out"
        )
    if not loaded.policy.evidence.mlflow.enabled:
        raise InputError(
            f"--tracking-uri {tracking_uri}: the policy {loaded.path} disables MLflow "
            "(evidence.mlflow.enabled: false), so nothing would be logged there; enable it "
            "in the policy, or leave the option out"
        )


_SQLITE_HEADER = b"SQLite format 3\x00"


def refuse_unusable_sqlite_store(
    loaded: LoadedPolicy, tracking_uri: str | None, *, mlflow: bool
) -> None:
    """Refuse, before any work, a SQLite tracking store that cannot be one: a directory, a
    file that is not a SQLite database, or a path below a file. A review: the audits ran,
    then MLflow retried for 30 s with a page of its own warnings and the gate said the
    store "did not answer" (exit 3). A missing database is created at the first log."""
    if not mlflow or not loaded.policy.evidence.mlflow.enabled:
        return
    from gate.evidence.mlflow_log import sqlite_path, tracking_uri_and_origin

    uri, source = tracking_uri_and_origin(tracking_uri, loaded.policy.evidence.mlflow.tracking_uri)
    path = sqlite_path(uri)
    if path is None:
        return
    origin = {
        "--tracking-uri": f"--tracking-uri {uri}",
        "MLFLOW_TRACKING_URI": f"MLFLOW_TRACKING_URI={uri}",
        "evidence.mlflow.tracking_uri": f"{loaded.path}: evidence.mlflow.tracking_uri: {uri}",
    }.get(source, f"the default tracking store {uri}")
    target = path.resolve()  # a symbolic link: where the store is
    problem = None
    if target.is_dir():
        problem = "is a directory; name a database file in it (e.g. mlflow.db)"
    elif target.is_file():
        try:
            with open(target, "rb") as handle:
                head = handle.read(len(_SQLITE_HEADER))
        except OSError as exc:
            problem = f"cannot be read ({exc.strerror or exc})"
        else:
            if head and head != _SQLITE_HEADER:
                problem = "is not a SQLite database; name another file, or move this one away"
    else:
        above = next((p for p in target.parents if p.exists()), None)
        if above is not None and not above.is_dir():
            problem = f"cannot be created: {above} is a file, not a directory"
    if problem is not None:
        raise InputError(f"{origin}: {path} {problem}")


def require_canary_source(loaded: LoadedPolicy, canary_source: pd.DataFrame | None) -> None:
    """Refuse, before any work, a bundle without the canary-source records an enabled
    canary audit crafts its canaries from.

    Raises:
        InputError: the canary audit is on and there are no canary-source records.
    """
    canary = loaded.policy.audits.canary
    if canary is not None and canary.enabled and (canary_source is None or canary_source.empty):
        raise InputError(
            f"{loaded.path}: audits.canary: the canary audit needs canary-source records "
            "(neither train nor holdout): split with `gate split --canary-fraction` and "
            "give its manifest, or give --canary-source FILE"
        )


def require_source_ids(
    loaded: LoadedPolicy, synthetic: pd.DataFrame, path: str | Path | None
) -> None:
    """Refuse, before any work, a release without the ``source_id`` links an enabled
    distinguishability audit plays its game on.

    Raises:
        InputError: the audit is on and no release record names a source record.
    """
    game = loaded.policy.audits.distinguishability
    if game is None or not game.enabled:
        return
    if "source_id" not in synthetic.columns or synthetic["source_id"].isna().all():
        raise InputError(
            f"{path or '--synthetic'}: no record has a source_id; {loaded.path}: "
            "audits.distinguishability needs a release of rewrites whose records name the "
            "source record they rewrite (a source_id column holding a record_id of the "
            "source records)"
        )


def only_audit(loaded: LoadedPolicy, name: str) -> LoadedPolicy:
    config = getattr(loaded.policy.audits, name, None)
    if config is None or not config.enabled:
        raise InputError(f"{loaded.path}: audits.{name}: the policy has no enabled {name} audit")
    if not config.sets_threshold():
        raise InputError(
            f"{loaded.path}: audits.{name}.thresholds: set at least one threshold, or the "
            "audit could never fail"
        )
    audits = type(loaded.policy.audits).model_construct(**{name: config})
    return replace(loaded, policy=loaded.policy.model_copy(update={"audits": audits}))


def with_engine(loaded: LoadedPolicy, engine: str | None, spark_master: str | None) -> LoadedPolicy:
    """The policy with ``--engine``/``--spark-master`` applied, its engine known here."""
    settings = loaded.policy.engine
    update = {
        key: value
        for key, value in (("name", engine), ("spark_master", spark_master))
        if value is not None
    }
    if update:
        try:
            settings = EngineSettings.model_validate({**settings.model_dump(), **update})
        except ValidationError as exc:
            first = exc.errors()[0]
            flags = {"name": "--engine", "spark_master": "--spark-master"}
            field = str(first["loc"][0]) if first["loc"] else ""
            flag = flags.get(field, " / ".join(flags[key] for key in update))
            message = str(first["msg"]).removeprefix("Value error, ")
            raise InputError(f"{flag}: {message}") from exc
        loaded = replace(loaded, policy=loaded.policy.model_copy(update={"engine": settings}))
    if settings.name not in ENGINES.names():
        where = "--engine" if engine is not None else f"{loaded.path}: engine.name"
        raise InputError(
            f"{where}: no engine {settings.name!r} in this installation "
            f"(available: {', '.join(ENGINES.names())}"
            + (")" if engine is not None else "; to run here, add --engine local)")
        )
    if spark_master is not None and settings.name != "spark":
        raise InputError(
            f"--spark-master applies to the spark engine; the engine is {settings.name!r} "
            "(add --engine spark)"
        )
    return loaded
