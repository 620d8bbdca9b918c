"""Policy engine: loading, defaults, schema, and every error path with its message."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import jsonschema
import pydantic
import pytest
import yaml

from gate.api import policy_schema, validate_policy
from gate.audits.registry import policy_checks
from gate.cli import main
from gate.errors import PolicyError
from gate.policy import effective_policy_yaml, load_policy, parse_policy
from gate.policy.loader import (
    NonStringKey,
    _UniqueKeyLoader,
    format_yaml_path,
    policy_json_schema,
    policy_location,
)
from gate.policy.models import NgramFeatures, PiiFeatures, SemanticFeatures

from .conftest import MINIMAL_POLICY, REPO

MINIMAL_DATA = yaml.safe_load(MINIMAL_POLICY)

HEAD = "version: 1\nname: t\n"


def error_of(text: str) -> str:
    with pytest.raises(PolicyError) as info:
        parse_policy(textwrap.dedent(text), source="p.yaml")
    return str(info.value)


def test_minimal_policy_gets_paper_defaults() -> None:
    policy = parse_policy(MINIMAL_POLICY)
    assert policy.alpha == 0.05
    assert policy.membership.p == 0.5
    assert policy.evidence.redact_witnesses is True
    ngram = policy.audits.disclosure.features[0]
    assert (ngram.max_users, ngram.tokenizer) == (1, "whitespace")
    assert policy.audits.disclosure.thresholds.epsilon_estimator == "exact"


def test_default_ngram_lengths_are_the_papers() -> None:
    policy = parse_policy(
        HEAD + "audits:\n  disclosure:\n    features: [{class: ngram}]\n"
        "    thresholds: {max_epsilon: 0}\n"
    )
    ngram = policy.audits.disclosure.features[0]
    assert (ngram.n_min, ngram.n_max) == (8, 16)


@pytest.mark.parametrize("path", sorted((REPO / "policies").glob("*.yaml")))
def test_shipped_policies_validate_and_every_key_is_commented(path: Path) -> None:
    """`gate policy validate` accepts each (a review found canary.yaml refused: its
    remediation block names the generator the canary audit trains, without the release
    size only `gate remediate` needs, which is now a note)."""
    loaded = load_policy(path)
    assert policy_checks(loaded.policy)
    found = validate_policy(path)
    assert found.notes == (
        (
            f"gate remediate would refuse it: {path}:48: remediation.sample_size: gate "
            "remediate needs a number of records per release, chosen without looking at the "
            "data (null, as many as train has, would make a private round's release size the "
            "exact count of train records, which its ε or η does not cover)",
        )
        if path.name == "canary.yaml"
        else ()
    )
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#") and ":" in stripped.split("#")[0]:
            assert "#" in line, f"{path.name}:{number} has a key without a comment: {line!r}"


def test_shipped_policies_include_the_three_named() -> None:
    names = {p.stem for p in (REPO / "policies").glob("*.yaml")}
    assert {"standard", "strict", "rewrite"} <= names


def test_every_problem_of_a_policy_is_an_error_line_of_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A review saw several problems joined by a literal backslash-n on one line."""
    policy = tmp_path / "two.yaml"
    policy.write_text(
        HEAD + "audits:\n  disclosure:\n    features:\n      - {class: ngram, n_min: 0}\n"
        "      - {class: ngram, n_max: 0}\n    thresholds: {max_epsilon: 0}\n"
    )
    assert main(["policy", "validate", str(policy)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and all(line.startswith(f"gate: error: {policy}:") for line in lines)
    assert "features[0].n_min" in lines[0] and "features[1].n_max" in lines[1]
    assert "\\n" not in "".join(lines)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("audits:\n  1: {}\n", "p.yaml:4: audits.1: Keys should be strings; found 1"),
        (
            "audits:\n  disclosure:\n    features: [{class: ngram}]\n    null: 3\n",
            "p.yaml:6: audits.disclosure.null: Keys should be strings; found null",
        ),
        (
            "audits:\n  disclosure:\n    features: [{class: ngram}]\n    true: 3\n",
            "p.yaml:6: audits.disclosure.true: Keys should be strings; found true",
        ),
        (
            "audits:\n  disclosure:\n    features: [{class: ngram}]\n    True: 3\n",
            "p.yaml:6: audits.disclosure.True: Keys should be strings; found true",
        ),
        ("audits:\n  1.5: {}\n", "p.yaml:4: audits[1.5]: Keys should be strings; found 1.5"),
        ("audits:\n  0x10: {}\n", "p.yaml:4: audits.0x10: Keys should be strings; found 16"),
        ("audits:\n  0o17: {}\n", "p.yaml:4: audits.0o17: Keys should be strings; found 15"),
        ("audits:\n  1e3: {}\n", "p.yaml:4: audits.1e3: Keys should be strings; found 1000.0"),
        (
            "audits:\n  .inf: {}\n",
            "p.yaml:4: audits[.inf]: Keys should be strings; found Infinity",
        ),
        ("audits:\n  ~: {}\n", "p.yaml:4: audits.~: Keys should be strings; found null"),
    ],
)
def test_a_key_that_is_no_string_is_named_at_its_own_line(body: str, expected: str) -> None:
    """A review: a key written as a number or null was reported at its parent's line, and
    ``true:`` (which pydantic names 1) as a list's ``[1]`` at the line above. The key is
    spelled as the file writes it and found as the policy loader reads it (YAML 1.2:
    ``1e3`` and ``0o17`` are numbers, which YAML 1.1 read as strings, so they were
    reported at the top line)."""
    assert error_of(HEAD + body) == expected


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ('!!null "{a: 1, a: 2}"', "p.yaml:4: audits.{a: 1, a: 2}: Keys should be strings"),
        ('!!null "["', "p.yaml:4: audits[[]: Keys should be strings"),
        ("!!bool 'TRUE'", "p.yaml:4: audits.TRUE: Keys should be strings; found true"),
        ("!!bool 'x'", "p.yaml:4:3: not valid YAML: 'x' is not a YAML 1.2 boolean"),
        *(
            (f"!!{tag} 'x'", f"p.yaml:4:3: not valid YAML: !!{tag} is a tag of YAML 1.1")
            for tag in ("timestamp", "set", "omap", "pairs", "binary", "value")
        ),
    ],
)
def test_a_key_with_an_explicit_tag_is_an_error_line(key: str, expected: str) -> None:
    """A review: such keys ended in exit 3 (a KeyError from PyYAML's bool constructor, a
    TypeError, an AttributeError, and a duplicate key found when the key's text was read
    again to place the error)."""
    assert error_of(HEAD + f"audits:\n  {key}: {{}}\n").startswith(expected)


@pytest.mark.parametrize("first", ["'1'", "1"])
def test_a_key_and_its_quoted_twin_are_told_apart(first: str) -> None:
    """A review: beside its quoted twin ``'1'``, the key ``1`` was reported at the twin's
    line; and both printed the path ``audits.1`` (the twin is ``audits.'1'`` now)."""
    second = "1" if first == "'1'" else "'1'"
    lines = error_of(HEAD + f"audits:\n  {first}: {{}}\n  {second}: {{}}\n").splitlines()
    number_line, quoted_line = (5, 4) if first == "'1'" else (4, 5)
    assert sorted(lines) == sorted(
        [
            f"p.yaml:{number_line}: audits.1: Keys should be strings; found 1",
            f"p.yaml:{quoted_line}: audits.'1': unknown key (the schema does not allow it; "
            "see `gate policy schema`)",
        ]
    )


@pytest.mark.parametrize(
    ("key", "twin", "key_path", "twin_path", "found"),
    [
        ("1.5", "'1.5'", "audits[1.5]", "audits.'1.5'", "1.5"),
        ("~", "'None'", "audits.~", "audits.None", "null"),
    ],
)
@pytest.mark.parametrize("key_first", [True, False])
def test_a_key_beside_the_twin_pydantic_names_alike_is_placed_at_its_own_line(
    key: str, twin: str, key_path: str, twin_path: str, found: str, key_first: bool
) -> None:
    """pydantic names ``1.5`` '1.5' and ``~`` 'None', as it names their quoted twins: both
    errors were placed at the twin. Only the key that is no string has pydantic's
    ``invalid_key`` error."""
    first, second = (key, twin) if key_first else (twin, key)
    key_line, twin_line = (4, 5) if key_first else (5, 4)
    lines = error_of(HEAD + f"audits:\n  {first}: {{}}\n  {second}: {{}}\n").splitlines()
    assert sorted(lines) == sorted(
        [
            f"p.yaml:{key_line}: {key_path}: Keys should be strings; found {found}",
            f"p.yaml:{twin_line}: {twin_path}: unknown key (the schema does not allow it; "
            "see `gate policy schema`)",
        ]
    )


@pytest.mark.parametrize("key_first", [True, False])
def test_a_mapping_settings_key_beside_its_twin_is_placed_at_its_own_line(
    key_first: bool,
) -> None:
    """A review: in ``dict[str, ...]`` fields (a generator's settings, ``spark_conf``)
    pydantic names a key that is no string ``(..., '1.5', '[key]')``, not
    ``invalid_key``, so the key's error was placed at its quoted twin, worded as a
    value's ("Input should be a valid string")."""
    first, second = ("1.5: 2", "'1.5': 1") if key_first else ("'1.5': 1", "1.5: 2")
    body = (
        "remediation:\n  generator: reference\n  sample_size: 10\n"
        f"  generator_config:\n    {first}\n    {second}\n"
    )
    start = MINIMAL_POLICY.count("\n") + 5
    key_line = start if key_first else start + 1
    assert error_of(MINIMAL_POLICY + body) == (
        f"p.yaml:{key_line}: remediation.generator_config[1.5]: Keys should be strings; found 1.5"
    )


def test_a_key_named_like_its_entrys_class_is_a_key() -> None:
    """A review: an entry's key named like the union tag that pydantic puts in the
    location (``ngram:`` in an entry of class ngram) took the entry's errors into it."""
    body = (
        "audits:\n  disclosure:\n    features:\n      - class: ngram\n        n_min: 0\n"
        "        ngram:\n          n_min: 5\n    thresholds: {max_epsilon: 0}\n"
    )
    assert sorted(error_of(HEAD + body).splitlines()) == [
        "p.yaml:7: audits.disclosure.features[0].n_min: Input should be greater than or "
        "equal to 1; found 0",
        "p.yaml:8: audits.disclosure.features[0].ngram: unknown key (the schema does not "
        "allow it; see `gate policy schema`)",
    ]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (  # only the outermost alias was named: the path enters *d (line 10), then *f (7)
            "x: &f\n  class: ngram\n  n_min: 0\n"
            "y: &d\n  features: [*f]\n  thresholds: {max_epsilon: 0}\n"
            "audits:\n  disclosure: *d\n",
            "p.yaml:5: audits.disclosure.features[0].n_min (through the aliases at lines 10 "
            "and 7): Input should be greater than or equal to 1; found 0",
        ),
        (  # the key belongs in the anchored mapping (line 3), not at the alias (line 6)
            "x: &t\n  thresholds: {max_epsilon: 0}\naudits:\n  disclosure: *t\n",
            "p.yaml:6: audits.disclosure.features (through the alias at line 6, in the "
            "mapping written at line 3): required key is missing",
        ),
        (  # a review: an entry without its scorer named neither the alias nor the mapping
            "s: &s\n  top_k: 1\naudits:\n  disclosure:\n    features: [{class: ngram}]\n"
            "    thresholds: {max_epsilon: 0}\n  membership:\n    scorers: [*s]\n",
            "p.yaml:10: audits.membership.scorers[0] (through the alias at line 10, in the "
            "mapping written at line 3): each entry needs a 'scorer' key",
        ),
    ],
)
def test_every_alias_a_path_goes_through_and_the_value_to_mend_are_named(
    body: str, expected: str
) -> None:
    assert error_of(HEAD + body).splitlines()[0] == expected


@pytest.mark.parametrize(
    ("key", "path", "message"),
    [
        (
            "bogus_{i}",
            "bogus_{i}",
            "unknown key (the schema does not allow it; see `gate policy schema`)",
        ),
        ("{i}.5", "[{i}.5]", "Keys should be strings; found {i}.5"),
    ],
)
def test_each_of_many_bad_keys_is_placed_at_its_own_line(key: str, path: str, message: str) -> None:
    """Placing N errors matched every key against every error (8,000 unknown keys took
    39 s, 8,000 float keys 31 s); each mapping's keys are indexed once now. Each error is
    still at its key's line."""
    body = "".join(key.format(i=i) + ": 1\n" for i in range(3000))
    lines = error_of(MINIMAL_POLICY + body).splitlines()
    first = MINIMAL_POLICY.count("\n") + 1
    assert lines == [
        f"p.yaml:{first + i}: {path.format(i=i)}: {message.format(i=i)}" for i in range(3000)
    ]


def test_error_names_yaml_path_line_expected_and_found() -> None:
    message = error_of(
        HEAD
        + "audits:\n"
        + "  disclosure:\n"
        + "    features:\n"
        + "      - class: ngram\n"
        + "      - class: pii\n"
        + "        score_threshold: 1.5\n"
        + "    thresholds: {max_epsilon: 0}\n"
    )
    assert message == (
        "p.yaml:8: audits.disclosure.features[1].score_threshold: "
        "Input should be less than or equal to 1; found 1.5"
    )


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (  # a value written once as an anchor and used through an alias
            "audits:\n  disclosure:\n    features:\n      - &f {class: ngram, n_min: 0}\n"
            "      - *f\n    thresholds: {max_epsilon: 0}\n",
            [
                "p.yaml:6: audits.disclosure.features[0].n_min: ",
                "p.yaml:6: audits.disclosure.features[1].n_min (through the alias at line 7): ",
            ],
        ),
        (  # a key written as an alias is located where the alias is written
            "audits:\n  disclosure:\n    features:\n      - {class: ngram, &k n_min: 3}\n"
            "      - class: ngram\n        *k : 0\n    thresholds: {max_epsilon: 0}\n",
            ["p.yaml:8: audits.disclosure.features[1].n_min: "],
        ),
    ],
)
def test_an_error_reached_through_an_alias_names_the_alias_line(
    body: str, expected: list[str]
) -> None:
    """Errors in a value used through an alias were located at its anchor only, so two
    uses of one anchor read as the same place."""
    lines = error_of(HEAD + body).splitlines()
    assert [line[: len(start)] for line, start in zip(lines, expected, strict=True)] == expected
    assert all(
        line.endswith("Input should be greater than or equal to 1; found 0") for line in lines
    )


def test_a_setting_checked_after_parsing_is_located_at_its_alias(tmp_path: Path) -> None:
    """:func:`policy_location` (errors found after parsing, by plug-ins) reads aliases as
    the parser's errors do: a key written as an alias is at the alias's line, not at its
    anchor's (here the policy's name)."""
    path = tmp_path / "p.yaml"
    path.write_text(
        "version: 1\nname: &k n_min\naudits:\n  disclosure:\n    features:\n"
        "      - {class: ngram, *k : 3}\n    thresholds: {max_epsilon: 0}\n"
    )
    loaded = load_policy(path)
    assert loaded.policy.audits.disclosure.features[0].n_min == 3
    assert policy_location(loaded, ("audits", "disclosure", "features", 0, "n_min")) == (
        f"{path}:6: audits.disclosure.features[0].n_min"
    )


def test_unknown_key_is_named() -> None:
    message = error_of(
        HEAD + "audits:\n  disclosure:\n    features: [{class: ngram, max_tokens: 3}]\n"
        "    thresholds: {max_epsilon: 0}\n"
    )
    assert "audits.disclosure.features[0].max_tokens: unknown key" in message


def test_unknown_top_level_key() -> None:
    message = error_of(MINIMAL_POLICY + "thresholds: {}\n")
    assert "p.yaml:11: thresholds: unknown key" in message


def test_missing_required_key() -> None:
    message = error_of("version: 1\naudits: {}\n")
    assert "p.yaml:1: name: required key is missing" in message


def test_wrong_version() -> None:
    assert "version: Input should be 1; found 2" in error_of(
        MINIMAL_POLICY.replace("version: 1", "version: 2")
    )


def test_wrong_type_names_what_was_found() -> None:
    message = error_of(MINIMAL_POLICY.replace("n_min: 3", "n_min: three"))
    assert "audits.disclosure.features[0].n_min: Input should be a valid integer" in message
    assert 'found "three"' in message


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            "max_epsilon: 0.5",
            'max_epsilon: "0.5"',
            'max_epsilon: Input should be a valid number; found "0.5"',
        ),
        ("n_min: 3", 'n_min: "3"', 'n_min: Input should be a valid integer; found "3"'),
        ("n_min: 3", "n_min: 3.0", "n_min: Input should be a valid integer; found 3.0"),
        (
            "name: test",
            "name: test\nseed: true",
            "seed: Input should be a valid integer; found true",
        ),
        (
            "name: test",
            "name: test\nalpha: '0.05'",
            'alpha: Input should be a valid number; found "0.05"',
        ),
        (
            "features:",
            "enabled: 'yes'\n    features:",
            'enabled: Input should be a valid boolean; found "yes"',
        ),
    ],
)
def test_values_are_not_coerced(old: str, new: str, expected: str) -> None:
    """A quoted number, a boolean seed or a quoted boolean is refused, not converted: the
    policy is read as written."""
    assert expected in error_of(MINIMAL_POLICY.replace(old, new, 1))


@pytest.mark.parametrize("word", ["off", "on", "no", "yes", "Off", "NO"])
def test_yaml_1_1_booleans_are_strings(word: str) -> None:
    """PyYAML (YAML 1.1) reads `enabled: off` as false: it silently disabled the audit.
    The policy reads booleans as YAML 1.2 does (true and false only), so it is refused."""
    assert yaml.load(f"x: {word}\n", Loader=_UniqueKeyLoader) == {"x": word}
    message = error_of(MINIMAL_POLICY.replace("features:", f"enabled: {word}\n    features:"))
    assert (
        f'audits.disclosure.enabled: Input should be a valid boolean; found "{word}" (a YAML '
        "1.2 boolean is true or false)" in message
    )
    for written, value in (("true", True), ("False", False), ("TRUE", True)):
        assert yaml.load(f"x: {written}\n", Loader=_UniqueKeyLoader) == {"x": value}


@pytest.mark.parametrize(("written", "value"), [("1e-6", 1e-6), ("1.0e9", 1e9), ("-2E+3", -2e3)])
def test_exponents_without_dot_or_sign_are_numbers(written: str, value: float) -> None:
    """PyYAML (YAML 1.1) reads 1e-6 as a string; the policy reads it as YAML 1.2 does."""
    data = yaml.load(f"number: {written}\n", Loader=_UniqueKeyLoader)
    assert data["number"] == value and isinstance(data["number"], float)
    policy = parse_policy(MINIMAL_POLICY.replace("max_epsilon: 0.5", "max_epsilon: 5e-1"))
    assert policy.audits.disclosure.thresholds.max_epsilon == 0.5  # type: ignore[union-attr]
    assert 'found "1e-6"' in error_of(MINIMAL_POLICY.replace("0.5", '"1e-6"'))
    # a string of that form is quoted by `gate policy show`, so its output reads back
    named = parse_policy(MINIMAL_POLICY.replace("name: test", 'name: "8271e42"'))
    assert parse_policy(effective_policy_yaml(named)) == named


@pytest.mark.parametrize(
    ("written", "read"),
    [
        ("010", 10),  # YAML 1.1: 8 (octal)
        ("0o10", 8),
        ("0x10", 16),
        ("+7", 7),
        (".5", 0.5),
        ("1:00", "1:00"),  # YAML 1.1: 60 (sexagesimal)
        ("1_000", "1_000"),  # YAML 1.1: 1000
        ("0b1000", "0b1000"),  # YAML 1.1: 8
    ],
)
def test_numbers_are_yaml_12s(written: str, read: object) -> None:
    """A review: `max_epsilon: 1:00` was 60 (a threshold that never fails), `n_min: 010`
    was 8, `seed: 1_000` was 1000. YAML 1.2 reads 010 as 10 and the others as strings,
    which the models refuse; `gate policy show` quotes every such string."""
    data = yaml.load(f"x: {written}\n", Loader=_UniqueKeyLoader)
    assert data == {"x": read} and type(data["x"]) is type(read)
    if isinstance(read, str):
        assert f'found "{written}"' in error_of(MINIMAL_POLICY.replace("0.5", written))
        if ":" not in written:  # not a name the schema allows
            named = parse_policy(MINIMAL_POLICY.replace("name: test", f'name: "{written}"'))
            assert parse_policy(effective_policy_yaml(named)) == named
    with pytest.raises(PolicyError, match=r"is not a YAML 1\.2"):
        parse_policy(MINIMAL_POLICY.replace("max_epsilon: 0.5", "max_epsilon: !!float 1:00"))


def test_lists_are_read_as_tuples_and_their_items_strictly() -> None:
    pii = HEAD + (
        "audits:\n  disclosure:\n    features:\n      - class: pii\n"
        "        entities: [EMAIL_ADDRESS, PHONE_NUMBER]\n    thresholds: {max_epsilon: 0.5}\n"
    )
    (features,) = parse_policy(pii).audits.disclosure.features  # type: ignore[union-attr]
    assert isinstance(features, PiiFeatures)
    assert features.entities == ("EMAIL_ADDRESS", "PHONE_NUMBER")
    message = error_of(pii.replace("PHONE_NUMBER", "3"))
    assert "audits.disclosure.features[0].entities[1]: Input should be a valid string" in message


def test_unknown_feature_class() -> None:
    message = error_of(HEAD + "audits:\n  disclosure:\n    features: [{class: bigram}]\n")
    assert "audits.disclosure.features[0]: unknown class 'bigram'; expected one of" in message


def test_feature_without_class() -> None:
    message = error_of(HEAD + "audits:\n  disclosure:\n    features: [{n_min: 3}]\n")
    assert "features[0]: each entry needs a 'class' key" in message


def test_n_min_above_n_max() -> None:
    message = error_of(MINIMAL_POLICY.replace("n_min: 3", "n_min: 9"))
    assert "n_min must be <= n_max; found n_min=9, n_max=4" in message


def test_duplicate_feature_class() -> None:
    message = error_of(
        HEAD + "audits:\n  disclosure:\n    features: [{class: ngram}, {class: ngram}]\n"
        "    thresholds: {max_epsilon: 0}\n"
    )
    assert (
        "audits.disclosure.features: each class may appear once; found duplicates: ['ngram']"
        in message
    )


def test_duplicate_scorer() -> None:
    message = error_of(
        HEAD + "audits:\n  membership:\n    scorers: [ngram, ngram]\n"
        "    thresholds: {max_auc: 0.6}\n"
    )
    assert "audits.membership.scorers: each scorer may appear once" in message


@pytest.mark.parametrize(
    ("snippet", "expected"),
    [
        ("alpha: 0.7\n", "alpha: Input should be less than or equal to 0.5; found 0.7"),
        ("alpha: 0\n", "alpha: Input should be greater than or equal to 0.000001; found 0"),
        ("membership: {p: 1.0}\n", "membership.p: Input should be less than 1; found 1.0"),
        ("seed: -1\n", "seed: Input should be greater than or equal to 0; found -1"),
        ("name: 'has space'\n", "name: String should match pattern"),
        (  # a review: "" had logged to gate/<name>, where tracking_uri: "" is refused
            "evidence: {mlflow: {experiment: ' '}}\n",
            "evidence.mlflow.experiment: must name an experiment; null (or leaving it out)",
        ),
    ],
)
def test_range_errors(snippet: str, expected: str) -> None:
    text = MINIMAL_POLICY.replace(
        "name: test\n", "" if snippet.startswith("name") else "name: test\n"
    )
    assert expected in error_of(text + snippet)


@pytest.mark.parametrize(
    ("audit", "expected", "valid_at_any_p"),
    [
        (
            "  membership: {scorers: [ngram], delta: 1.0e-5, thresholds: {max_epsilon: 1}}\n",
            "audits.membership.delta = 1e-05 needs membership.p = 0.5",
            "  membership: {scorers: [ngram], delta: 0, thresholds: {max_epsilon: 1}}\n",
        ),
        (
            "  profile: {scorers: [ngram], thresholds: {max_delta: 0.01}}\n",
            "audits.profile.scorers: the minimal-delta bound needs membership.p = 0.5",
            "  profile: {scorers: [], ngram_lbf: {enabled: true}, "
            "thresholds: {max_delta_floor: 0.01}}\n",
        ),
    ],
)
def test_one_run_delta_bounds_need_p_one_half(
    audit: str, expected: str, valid_at_any_p: str
) -> None:
    """Refused when the policy is read, not after the scoring (the bound with delta > 0
    is derived for p = 1/2); at p = 1/2, or without that bound, the audits are valid."""
    head = "version: 1\nname: t\nmembership: {p: 0.3}\naudits:\n"
    assert expected in error_of(head + audit)
    parse_policy(head.replace("p: 0.3", "p: 0.5") + audit)
    parse_policy(head + valid_at_any_p)


def test_threshold_ranges() -> None:
    message = error_of(
        HEAD + "audits:\n  membership:\n    thresholds: {max_auc: 1.2, max_rip_eta: 0.6}\n"
    )
    assert "audits.membership.thresholds.max_auc: Input should be less than 1; found 1.2" in message
    assert (
        "audits.membership.thresholds.max_rip_eta: Input should be less than 0.5; found 0.6"
        in message
    )


def test_policy_without_audits_is_rejected() -> None:
    assert "the policy enables no audit" in error_of(HEAD + "audits: {}\n")


def test_disabled_audits_count_as_none() -> None:
    text = MINIMAL_POLICY.replace("  disclosure:\n", "  disclosure:\n    enabled: false\n")
    assert "the policy enables no audit" in error_of(text)


def test_policy_that_cannot_fail_is_rejected() -> None:
    message = error_of(HEAD + "audits:\n  disclosure:\n    features: [{class: ngram}]\n")
    assert "the policy sets no threshold; it could never fail" in message


def test_content_logging_requires_unredacted_witnesses() -> None:
    message = error_of(MINIMAL_POLICY + "evidence: {mlflow: {log_dataset_content: true}}\n")
    assert "log_dataset_content requires evidence.redact_witnesses: false" in message


def test_duplicate_yaml_key_is_an_error() -> None:
    message = error_of(MINIMAL_POLICY + "alpha: 0.05\nalpha: 0.5\n")
    assert "duplicate key 'alpha' (first at line 11)" in message
    assert message.startswith("p.yaml:12:")


def test_complex_and_merge_keys_are_bad_input_and_dates_are_text() -> None:
    """A review: `? {a: 1}` as a key was an unexpected TypeError (exit 3), `<<:` a bare
    constructor error, and `description: 2026-11-29` a date the model refused as "not a
    valid string" (YAML 1.2 has no timestamps)."""
    for key in ("? {a: 1}\n: 2\n", "{[a]: 1}: 2\n"):
        assert "a key must be a plain name, not a mapping or a list" in error_of(
            MINIMAL_POLICY + key
        )
    merged = "base: &b {alpha: 0.05}\n<<: *b\n"
    assert "merge keys (<<) are YAML 1.1 and not read" in error_of(MINIMAL_POLICY + merged)
    assert parse_policy(MINIMAL_POLICY + "description: 2026-11-29\n").description == "2026-11-29"
    assert parse_policy(MINIMAL_POLICY + "description: =\n").description == "="


def test_aliases_that_expand_beyond_any_policy_are_bad_input() -> None:
    """A review: 1.6 KB of nested aliases (10 per level, 9 levels) in a free-form block
    expanded to 10⁹ values when the policy was written into the report; the gate ran out
    of memory. Another: one 100 KB string aliased 99,000 times (10 GB). Values and
    characters are counted expanded, without expanding them; a value that holds itself is
    refused; a few aliases are read."""
    levels = ["  l0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"] + [
        f"  l{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)
    ]
    bomb = "remediation:\n generator_config:\n" + "\n".join(" " + line for line in levels) + "\n"
    assert len(bomb) < 1_700
    expected = (
        "p.yaml: the policy holds more than 1,000,000 values and characters with its YAML "
        "aliases expanded; a policy is not that large"
    )
    assert error_of(MINIMAL_POLICY + bomb) == expected
    text = "remediation:\n generator_config:\n  s: &s " + "x" * 100_000 + "\n"
    long_text = text + "  l: [" + ", ".join(["*s"] * 20) + "]\n"
    assert error_of(MINIMAL_POLICY + long_text) == expected
    assert "a YAML alias refers to a value that holds it" in error_of(
        MINIMAL_POLICY + "remediation:\n generator_config: {a: &r [1, *r]}\n"
    )
    shared = "description: &d text\nseed: 3\n"
    assert parse_policy(MINIMAL_POLICY.replace("name: test", "name: &n test") + shared).seed == 3


def test_yaml_syntax_error_names_line_and_column() -> None:
    message = error_of("version: 1\nname: [unclosed\n")
    assert message.startswith("p.yaml:3:1: not valid YAML")


def test_python_tags_are_refused() -> None:
    message = error_of("version: !!python/object/apply:os.system ['true']\n")
    assert "not valid YAML" in message


def test_empty_and_non_mapping_files() -> None:
    assert error_of("") == "p.yaml: the policy file is empty"
    assert error_of("- 1\n") == "p.yaml: the policy must be a mapping at the top level; found list"


def test_missing_and_undecodable_files(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="policy file not found"):
        load_policy(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"version: 1\nname: \xff\n")
    with pytest.raises(PolicyError, match=r"bad.yaml: not UTF-8 text \(byte 17\)"):
        load_policy(bad)


def test_loaded_policy_records_sha256(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(MINIMAL_POLICY)
    import hashlib

    assert load_policy(path).sha256 == hashlib.sha256(MINIMAL_POLICY.encode()).hexdigest()


def test_effective_policy_round_trips() -> None:
    policy = parse_policy(MINIMAL_POLICY)
    shown = effective_policy_yaml(policy)
    assert "n_max: 4" in shown and "redact_witnesses: true" in shown
    assert parse_policy(shown) == policy


def test_checks_follow_estimator_choice() -> None:
    exact = parse_policy(MINIMAL_POLICY)
    assert [c.metric for c in policy_checks(exact)] == ["ngram.epsilon_lower_exact"]
    text = MINIMAL_POLICY.replace(
        "max_epsilon: 0.5", "max_epsilon: 0.5\n      epsilon_estimator: hoeffding"
    )
    hoeffding = parse_policy(text)
    assert [c.metric for c in policy_checks(hoeffding)] == ["ngram.epsilon_lower"]


def test_every_threshold_kind_maps_to_a_check() -> None:
    policy = parse_policy(
        HEAD
        + """\
audits:
  disclosure:
    features: [{class: ngram}, {class: semantic}]
    thresholds: {max_epsilon: 1, max_excess_disclosures: 5}
  membership:
    scorers: [ngram, embedding]
    thresholds: {max_auc: 0.6, tpr_at_fpr: {fpr: 0.01, max_tpr: 0.05}, max_epsilon: 1, max_rip_eta: 0.1}
"""
    )
    checks = policy_checks(policy)
    assert all(c.spec.estimator and c.spec.confidence for c in checks)
    metrics = [(c.audit, c.metric) for c in checks]
    assert metrics == [
        ("disclosure", "ngram.epsilon_lower_exact"),
        ("disclosure", "ngram.excess_disclosures_lower"),
        ("disclosure", "semantic.epsilon_lower_exact"),
        ("disclosure", "semantic.excess_disclosures_lower"),
        ("membership", "ngram.auc"),
        ("membership", "ngram.tpr_at_fpr_0.01"),
        ("membership", "ngram.epsilon_lower"),
        ("membership", "ngram.rip_eta_lower"),
        ("membership", "embedding.auc"),
        ("membership", "embedding.tpr_at_fpr_0.01"),
        ("membership", "embedding.epsilon_lower"),
        ("membership", "embedding.rip_eta_lower"),
    ]


@pytest.mark.parametrize(
    ("block", "sets_threshold"),
    [
        ("profile:\n    thresholds: {target_epsilon: 2}", False),
        ("profile:\n    thresholds: {max_delta: 0.001}", True),
        ("profile:\n    thresholds: {max_delta_floor: 0.0001}", True),
        ("distinguishability:\n    thresholds: {max_epsilon: 2}", True),
    ],
)
def test_a_policy_sets_a_threshold_only_through_an_optional_field(
    block: str, sets_threshold: bool
) -> None:
    text = HEAD + "audits:\n  " + block + "\n"
    if sets_threshold:
        assert parse_policy(text).audits.enabled()
    else:
        assert "it could never fail" in error_of(text)


def test_schema_is_exported_and_forbids_extra_keys() -> None:
    schema = policy_json_schema()
    assert schema["additionalProperties"] is False
    assert schema["$defs"]["NgramFeatures"]["additionalProperties"] is False
    assert "class" in schema["$defs"]["NgramFeatures"]["properties"]
    for kind in ("DisclosureThresholds", "MembershipThresholds", "ProfileThresholds"):
        assert kind in schema["$defs"]


def test_every_shipped_policy_meets_the_schema_with_generator_settings() -> None:
    """`gate policy schema` checks a generator's settings against the generator the block
    names (the reference generator when it names none)."""
    schema = policy_schema()
    validator = jsonschema.Draft202012Validator(schema)
    for path in sorted((REPO / "policies").glob("*.yaml")):
        data = yaml.load(path.read_text(), Loader=_UniqueKeyLoader)
        assert not list(validator.iter_errors(data)), path
    remediation = {"generator_config": {"layers": 2}, "sample_size": 10}
    assert validator.is_valid({**MINIMAL_DATA, "remediation": remediation})
    for config in ({"layerz": 2}, {"layers": "two"}, {"layers": 0}):
        for named in ({}, {"generator": "reference"}):
            bad = {**remediation, **named, "generator_config": config}
            assert not validator.is_valid({**MINIMAL_DATA, "remediation": bad}), (config, named)
    # an import path is free-form
    free = {**remediation, "generator": "my.module:Gen", "generator_config": {"layerz": 2}}
    assert validator.is_valid({**MINIMAL_DATA, "remediation": free})


def test_format_yaml_path() -> None:
    assert format_yaml_path(("audits", "disclosure", "features", 1, "n_max")) == (
        "audits.disclosure.features[1].n_max"
    )
    assert format_yaml_path(()) == "(top level)"
    # string keys YAML would not read back unquoted, or that look like a path, are quoted
    assert format_yaml_path(("audits", "1")) == "audits.'1'"
    assert format_yaml_path(("audits", NonStringKey("1"))) == "audits.1"
    # a key that is no string and holds a dot is one part, not the key 5 in the key 1
    assert format_yaml_path(("audits", NonStringKey("1.5"), "x")) == "audits[1.5].x"
    assert format_yaml_path(("a", "b.c", "x[0]", "it's", "true", "")) == (
        "a.'b.c'.'x[0]'.'it''s'.'true'.''"
    )
    assert format_yaml_path(("größe", "x-y", "_k2", "on")) == "größe.x-y._k2.on"
    assert format_yaml_path(("a\nb",)) == '"a\\nb"'  # one line, and YAML reads it back


def test_a_deeply_nested_unknown_key_is_still_an_error_line() -> None:
    """A review: placing the error composed the policy again with more stack per level,
    and 350 nested lists ended in a RecursionError (exit 3) instead of the error."""
    message = error_of(MINIMAL_POLICY + "bogus: " + "[" * 350 + "]" * 350 + "\n")
    assert "bogus: unknown key" in message


def test_policy_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(MINIMAL_POLICY)
    assert main(["policy", "validate", str(good)]) == 0
    assert "valid policy 'test'" in capsys.readouterr().out
    assert main(["policy", "show", str(good)]) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    assert shown["audits"]["disclosure"]["features"][0]["n_max"] == 4
    assert main(["policy", "schema"]) == 0
    assert json.loads(capsys.readouterr().out)["title"].startswith("gate policy")
    bad = tmp_path / "bad.yaml"
    bad.write_text(MINIMAL_POLICY.replace("n_min: 3", "n_min: 0"))
    assert main(["policy", "validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "audits.disclosure.features[0].n_min" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("engine: {name: warp}\n", "p.yaml: engine.name: no engine 'warp' in this installation"),
        ("remediation: {generator: nope}\n", "remediation.generator: unknown generator 'nope'"),
        (
            "remediation: {generator: reference, generator_config: {bogus: 1}}\n",
            "remediation.generator_config.bogus: unknown key (the schema does not allow it",
        ),
        (
            "remediation: {generator: 'tests.fake_generators:NoSuchGenerator'}\n",
            "has no attribute 'NoSuchGenerator'",
        ),
    ],
)
def test_policy_validate_checks_what_every_command_would(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    bundle_files: dict[str, Path],
    extra: str,
    message: str,
) -> None:
    """The engine, the generator gate remediate trains and its settings are checked by
    `gate policy validate` and by `gate check` too, not first when `gate remediate` runs
    after a FAIL (exit 2, the YAML path; a review's `gate check` passed a policy whose
    remediation settings `gate remediate` refused)."""
    path = tmp_path / "p.yaml"
    path.write_text(MINIMAL_POLICY + extra)
    assert main(["policy", "validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    out = tmp_path / "report"
    check = ["check", "--policy", str(path), "--synthetic", str(bundle_files["synthetic"])]
    check += ["--train", str(bundle_files["train"]), "--holdout", str(bundle_files["holdout"])]
    assert main([*check, "--out", str(out), "--no-mlflow"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not out.exists() or not any(out.iterdir())


def test_policy_model_is_frozen() -> None:
    policy = parse_policy(MINIMAL_POLICY)
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        policy.alpha = 0.5  # type: ignore[misc]


def test_settings_of_finds_every_configuration_of_a_kind_in_the_enabled_audits() -> None:
    """A disclosure class and a scorer sharing it are both found, a scorer's own features
    too; a disabled audit's are not."""
    shared = parse_policy(
        textwrap.dedent(
            """\
            version: 1
            name: p
            audits:
              disclosure:
                features: [{class: ngram}, {class: semantic, precision: bfloat16}]
                thresholds: {max_epsilon: 0.5}
              membership:
                scorers: [embedding]
                thresholds: {max_auc: 0.6}
            """
        )
    )
    assert [(s.precision, s.neighbours) for s in shared.settings_of(SemanticFeatures)] == [
        ("bfloat16", 10),
        ("bfloat16", 10),
    ]
    assert [s.n_min for s in shared.settings_of(NgramFeatures)] == [8]
    assert shared.settings_of(PiiFeatures) == []
    own = parse_policy(
        textwrap.dedent(
            """\
            version: 1
            name: p
            audits:
              disclosure:
                enabled: false
                features: [{class: semantic, neighbours: 7}]
                thresholds: {max_epsilon: 0.5}
              membership:
                scorers: [{scorer: embedding, features: {class: semantic, neighbours: 3}}]
                thresholds: {max_auc: 0.6}
            """
        )
    )
    assert [s.neighbours for s in own.settings_of(SemanticFeatures)] == [3]


@pytest.mark.parametrize(("character", "column"), [("\x1b", 1), ("\x00", 1), ("\ufffe", 1)])
def test_a_character_yaml_refuses_is_one_line_naming_its_place(character: str, column: int) -> None:
    """A review: a control character gave a two-line message with a character offset."""
    message = error_of(f"version: 1\nname: x\n{character}: 1\n")
    assert message == (
        f"p.yaml:3:{column}: not valid YAML: character U+{ord(character):04X} is not "
        "allowed in YAML (it takes printable characters only)"
    )


def test_declared_split_settings() -> None:
    policy = parse_policy(MINIMAL_POLICY)
    assert policy.membership.declared_split.p == "assume"
    assert policy.membership.declared_split.gamma_share == 0.2
    policy = parse_policy(
        MINIMAL_POLICY + "membership:\n  declared_split: {p: interval, gamma_share: 0.1}\n"
    )
    assert policy.membership.declared_split.p == "interval"
    assert policy.membership.declared_split.gamma_share == 0.1
    for bad, message in (
        ("{p: bounded}", r"p\.yaml:\d+: membership\.declared_split\.p: .*'assume' or 'interval'"),
        ("{gamma_share: 1}", r"membership\.declared_split\.gamma_share: .*less than 1"),
        ("{gamma_share: 0}", r"membership\.declared_split\.gamma_share: .*greater than 0"),
        ("{gamma: 0.1}", r"membership\.declared_split\.gamma: "),
        (
            "{p: interval, gamma_share: 0.5}\nalpha: 1.5e-6",
            r"gamma_share = 0\.5 leaves the statements alpha \(1 - gamma_share\) = 7\.5e-07",
        ),
        (
            "{p: interval, gamma_share: 1.0e-12}",
            r"gamma_share = 1e-12 gives the interval of p a miss chance .* = 5e-14",
        ),
    ):
        with pytest.raises(PolicyError, match=message):
            parse_policy(
                MINIMAL_POLICY + f"membership:\n  declared_split: {bad}\n", source="p.yaml"
            )


@pytest.mark.parametrize(
    ("original", "broken", "expected"),
    [
        (
            "    generator_config: null",
            "    generator_config: {bogus_setting: 1}",
            ":{line}: audits.canary.generator_config.bogus_setting: unknown key (the schema "
            "does not allow it; see `gate policy schema`)",
        ),
        (
            "      config: {max_length: 160}",
            "      config: {max_length: 160, layerz: 2}",
            ":{line}: audits.canary.base_lm.config.layerz: unknown key (the schema does not "
            "allow it; see `gate policy schema`); did you mean 'layers'?",
        ),
    ],
)
def test_a_canary_generator_setting_is_named_by_line_and_worded_as_the_policys(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    original: str,
    broken: str,
    expected: str,
) -> None:
    """A review: the canary audit's generator settings were refused without the file or
    line, in pydantic's words ("Extra inputs are not permitted"), where the same key under
    ``remediation.generator_config`` was named by line."""
    text = (REPO / "policies" / "canary.yaml").read_text()
    lines = text.splitlines()
    line = next(i for i, row in enumerate(lines, 1) if row.startswith(original + " "))
    lines[line - 1] = broken
    path = tmp_path / "c.yaml"
    path.write_text("\n".join(lines) + "\n")
    assert main(["policy", "validate", str(path)]) == 2
    assert capsys.readouterr().err == f"gate: error: {path}" + expected.format(line=line) + "\n"
