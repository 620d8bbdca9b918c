"""The generator's training data checked against the split (``--training-data``): a split
drawn after training, or a holdout that reached training, is refused."""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from gate.api.preflight import training_data_warnings
from gate.cli import main
from gate.data.bundle import load_bundle
from gate.data.training_data import _between, _boundaries, _shared_prefixes
from gate.errors import BundleError
from gate.policy.models import MembershipPolicy, TextPolicy

from .conftest import (
    MINIMAL_POLICY,
    check_args,
    read_report,
    unique_text,
    write_jsonl,
    write_policy,
)

LONG_A = "a wrote this note about the weather on the first day"
LONG_D = "d wrote this note about the café on the second day"
SOURCE = [  # user, text, side
    ("a", "Thanks!", "train"),
    ("a", LONG_A, "train"),
    ("b", "b's short note", "train"),
    ("c", "Thanks!", "holdout"),
    ("d", LONG_D, "holdout"),
    ("d", "d's short note", "holdout"),
    ("e", "   ", "holdout"),
]


def _check(
    tmp_path: Path,
    rows: list[dict],
    text: TextPolicy | None = None,
    source_rows: list[tuple[str, str, str]] = SOURCE,
):
    """Load a bundle of ``source_rows`` (one file with a split column) with ``rows`` as
    the training data; its check, or the BundleError."""
    source = write_jsonl(
        tmp_path / "source.jsonl",
        [{"user_id": u, "text": t, "split": side} for u, t, side in source_rows],
    )
    bundle = load_bundle(
        source=source,
        synthetic=None,
        membership=MembershipPolicy(split_check={"action": "warn"}),
        text=text or TextPolicy(),
        training_data=write_jsonl(tmp_path / "trained-on.jsonl", rows),
    )
    return bundle.membership.training_data


def test_counts_of_a_training_file_that_is_train_and_public_text(tmp_path: Path) -> None:
    found = _check(
        tmp_path,
        [{"text": "Thanks!"}, {"text": LONG_A}, {"text": "a public text"}],
    )
    # only train holds LONG_A and "b's short note"; only holdout holds LONG_D (8+ words,
    # one user: distinctive) and "d's short note" (weak); "Thanks!" is both sides', the
    # blank text nobody's
    assert (found.records, found.train_only_records, found.train_only_records_found) == (3, 2, 1)
    assert (found.distinctive_holdout_records, found.weak_holdout_records) == (1, 1)
    assert (found.weak_holdout_records_found, found.weak_holdout_first_line) == (0, None)
    assert (found.user_column, found.users, found.train_users_found) == (None, None, None)
    assert not found.saw_nothing_of_train()
    assert "none of the 1 holdout records of distinctive text; 1 of the 2 train records" in (
        found.summary()
    )


def test_a_text_both_sides_hold_or_a_blank_one_is_no_evidence(tmp_path: Path) -> None:
    found = _check(tmp_path, [{"text": "Thanks!"}, {"text": "  "}, {"text": ""}])
    assert found.train_only_records_found == 0 and found.saw_nothing_of_train()


def test_a_short_holdout_only_text_is_counted_not_refused(tmp_path: Path) -> None:
    found = _check(tmp_path, [{"text": LONG_A}, {"text": "x"}, {"text": " d's  short note\n"}])
    assert (found.weak_holdout_records_found, found.weak_holdout_first_line) == (1, 3)
    assert "(but 1 of short or shared text)" in found.summary()
    warnings = training_data_warnings(found)
    assert len(warnings) == 1 and "text of 1 of the 1 holdout records" in warnings[0]
    assert "at line 3" in warnings[0] and "short note" not in warnings[0]


@pytest.mark.parametrize(
    "written",
    [
        LONG_D,
        f"  {LONG_D}\n",
        LONG_D.replace(" ", "\n\n", 2).replace("café", "café\u2028\u3000"),
        unicodedata.normalize("NFD", LONG_D),
    ],
)
def test_a_holdout_only_text_is_refused_at_its_line_without_its_value(
    tmp_path: Path, written: str
) -> None:
    rows = [{"text": LONG_A}, {"text": "other"}, {"text": written}]
    with pytest.raises(BundleError) as error:
        _check(tmp_path, rows)
    message = str(error.value)
    assert "trained-on.jsonl: line 3 holds the text of a holdout record" in message
    assert "(this training data holds 1 of the 1 such holdout records)" in message
    assert "gate split" in message and "café" not in message


def test_a_holdout_user_is_refused_at_its_line_without_the_id(tmp_path: Path) -> None:
    rows = [
        {"user_id": "a", "text": "a's other note"},
        {"text": "public text, no user"},
        {"user_id": None, "text": "public text, no user either"},
        {"user_id": "d", "text": "d wrote this after the split"},
    ]
    with pytest.raises(BundleError) as error:
        _check(tmp_path, rows)
    message = str(error.value)
    assert (
        "line 4: the 'user_id' is one of the holdout's (this training data holds 1 of the 3 "
        in message
    )
    assert "'d'" not in message


NUMBERED = [  # users numbered; "007" and "7" are two users of the source
    ("11", "Thanks!", "train"),
    ("007", "a short note", "train"),
    ("12", "Thanks!", "holdout"),
    ("7", "another short note", "holdout"),
]


@pytest.mark.parametrize(
    "written, by_number",
    [("12.0", True), ("+012", True), ("12.", True), (12, False), (12.0, False), ("7.00", True)],
)
def test_a_holdout_id_written_as_another_form_of_its_number_is_refused(
    tmp_path: Path, written: object, by_number: bool
) -> None:
    """A pipeline that read the ids as numbers writes ``12.0``; one that padded them,
    ``012``. Where two users write one number (``007`` and ``7``), the holdout's is
    taken: the check must not miss a holdout user. (JSON numbers are the bundle's own
    reading of ids: ``12.0`` is ``12``.)"""
    rows = [{"user_id": "11", "text": "x"}, {"user_id": written, "text": "y"}]
    form = " (written as another form of its integer)" if by_number else ""
    with pytest.raises(BundleError, match=rf"line 2: the 'user_id'{re.escape(form)} is one of"):
        _check(tmp_path, rows, source_rows=NUMBERED)


def test_ids_are_matched_as_written_first_then_as_numbers(tmp_path: Path) -> None:
    found = _check(
        tmp_path,
        [
            {"user_id": "007", "text": "x"},  # the train user as written
            {"user_id": "11.0", "text": "y"},  # the train user 11
            {"user_id": "1.2e1", "text": "z"},  # no plain decimal integer: no user's
            {"user_id": "12.5", "text": "z"},
        ],
        source_rows=NUMBERED,
    )
    assert (found.users, found.train_users, found.train_users_found) == (4, 2, 2)


def test_users_of_train_are_counted_and_rows_without_one_are_public(tmp_path: Path) -> None:
    found = _check(
        tmp_path,
        [{"user_id": "a", "text": "x"}, {"user_id": "z", "text": "y"}, {"text": "z"}],
    )
    assert (found.user_column, found.users, found.train_users, found.train_users_found) == (
        "user_id",
        2,
        2,
        1,
    )
    assert found.train_only_records_found == 0 and not found.saw_nothing_of_train()


def test_without_a_user_column_in_the_source_ids_are_not_compared(tmp_path: Path) -> None:
    """A review: users were then lines ("1" ... "N"), and a training file's own numeric
    user_id met holdout's by chance."""
    source = write_jsonl(
        tmp_path / "source.jsonl",
        [{"text": unique_text(i), "split": "train" if i % 2 else "holdout"} for i in range(1, 21)],
    )
    trained = write_jsonl(
        tmp_path / "trained-on.jsonl",
        [{"user_id": i, "text": unique_text(i)} for i in range(1, 21, 2)],
    )
    bundle = load_bundle(
        source=source,
        synthetic=None,
        membership=MembershipPolicy(),
        training_data=trained,
    )
    found = bundle.membership.training_data
    assert found.user_column is None and found.train_only_records_found == 10


def test_html_extracted_from_holdout_records_is_refused_under_markup_html(
    tmp_path: Path,
) -> None:
    """A review: under markup: html the bundle reads a link's address after the shown
    text, which a pipeline's text of the HTML lacks."""
    html = (
        "<p>Hello, I am holdout d and I write <a href='mailto:d@example.org'>my "
        "address</a> &amp; more words soon.</p>"
    )
    shown = "Hello, I am holdout d and I write my address & more words soon."
    source = [*SOURCE, ("f", html, "holdout")]
    html_policy = TextPolicy(markup="html")
    with pytest.raises(BundleError, match="line 2 holds the text of a holdout record"):
        _check(tmp_path, [{"text": LONG_A}, {"text": shown}], html_policy, source)
    with pytest.raises(BundleError, match="line 1 holds the text of a holdout record"):
        _check(tmp_path, [{"text": html}], html_policy, source)
    with pytest.raises(BundleError, match="line 1 holds the text of a holdout record"):
        _check(tmp_path, [{"text": shown}], source_rows=source)  # under markup: none too


def _bundle(tmp_path: Path) -> dict[str, Path]:
    def rows(users: range) -> list[dict]:
        return [{"user_id": f"u{i}", "text": unique_text(i)} for i in users]

    files = {
        "train": write_jsonl(tmp_path / "train.jsonl", rows(range(0, 20))),
        "holdout": write_jsonl(tmp_path / "holdout.jsonl", rows(range(20, 40))),
        "synthetic": write_jsonl(
            tmp_path / "synthetic.jsonl", [{"text": unique_text(i)} for i in range(5)]
        ),
    }
    files["everything"] = write_jsonl(tmp_path / "everything.jsonl", rows(range(40)))
    return files


def test_load_bundle_records_the_check_in_membership_and_inputs(tmp_path: Path) -> None:
    files = _bundle(tmp_path)
    bundle = load_bundle(
        train=files["train"],
        holdout=files["holdout"],
        synthetic=files["synthetic"],
        membership=MembershipPolicy(),
        training_data=files["train"],
    )
    trained = bundle.membership.as_dict()["training_data"]
    assert trained["train_only_records_found"] == 20
    assert trained["distinctive_holdout_records"] == 20
    assert trained["holdout_users_found"] == 0 and trained["train_users_found"] == 20
    assert bundle.fingerprints["training_data"].records == 20
    no_check = load_bundle(
        train=files["train"],
        holdout=files["holdout"],
        synthetic=files["synthetic"],
        membership=MembershipPolicy(),
    )
    assert no_check.membership.training_data is None and "training_data" not in (
        no_check.fingerprints
    )


def test_gate_check_refuses_training_data_that_holds_the_holdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = _bundle(tmp_path)
    files["policy"] = write_policy(tmp_path / "policy.yaml")
    out = tmp_path / "out"
    args = check_args(files, out, "--no-mlflow", **{"training-data": str(files["everything"])})
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "everything.jsonl: line 21 holds the text of a holdout record" in err
    assert not (out / "report.json").exists()


def test_gate_check_reports_the_check_and_warns_of_a_file_that_holds_nothing_of_train(
    tmp_path: Path,
) -> None:
    files = _bundle(tmp_path)
    files["policy"] = write_policy(tmp_path / "policy.yaml")
    out = tmp_path / "out"
    args = check_args(files, out, "--no-mlflow", **{"training-data": str(files["train"])})
    assert main(args) in (0, 1)
    report = read_report(out)
    assert report["membership"]["training_data"]["train_only_records_found"] == 20
    assert report["inputs"]["training_data"]["records"] == 20
    assert not any("training data" in w for w in report["warnings"])
    assert "Training data:" in (out / "report.html").read_text()
    assert "Training data:" in (out / "summary.md").read_text()

    unrelated = write_jsonl(tmp_path / "unrelated.jsonl", [{"text": "a public text"}])
    args = check_args(files, out, "--no-mlflow", **{"training-data": str(unrelated)})
    assert main(args) in (0, 1)
    warnings = read_report(out)["warnings"]
    assert any("holds no text that only train holds" in w for w in warnings), json.dumps(warnings)


def test_the_example_split_again_after_training_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A review re-split the bundled example with seed 42 after its generator was trained
    on split/train.jsonl: the release passed. Given that training file, it is refused."""
    example = Path(__file__).parents[1] / "examples" / "bundle"
    resplit = tmp_path / "resplit"
    split = ["split", "--source", str(example / "source.jsonl"), "--seed", "42"]
    assert main([*split, "--out", str(resplit)]) == 0
    policy = write_policy(tmp_path / "policy.yaml")
    check = ["check", "--quiet", "--no-mlflow", "--policy", str(policy)]
    check += ["--manifest", str(resplit / "split-manifest.json")]
    check += ["--synthetic", str(example / "synthetic.jsonl"), "--out", str(tmp_path / "out")]
    capsys.readouterr()
    assert main([*check, "--training-data", str(example / "split" / "train.jsonl")]) == 2
    assert "holds 96 of the 216 such holdout records" in capsys.readouterr().err
    assert not (tmp_path / "out" / "report.json").exists()
    assert main(check) == 0  # the release alone cannot show it


@pytest.mark.parametrize("words, refused", [(7, False), (8, True)])
def test_eight_words_make_a_holdout_only_text_proof(
    tmp_path: Path, words: int, refused: bool
) -> None:
    text = " ".join(f"held{i}" for i in range(words))
    source = [*SOURCE, ("g", text, "holdout")]
    rows = [{"text": LONG_A}, {"text": text}]
    if refused:
        with pytest.raises(BundleError, match="line 2 holds the text of a holdout record"):
            _check(tmp_path, rows, source_rows=source)
    else:
        found = _check(tmp_path, rows, source_rows=source)
        assert (found.weak_holdout_records_found, found.weak_holdout_first_line) == (1, 2)


def test_a_policy_can_require_the_training_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = _bundle(tmp_path)
    policy = MINIMAL_POLICY.replace(
        "audits:\n", "membership:\n  training_data: required\naudits:\n"
    )
    files["policy"] = write_policy(tmp_path / "policy.yaml", policy)
    out = tmp_path / "out"
    assert main(check_args(files, out, "--no-mlflow")) == 2
    err = capsys.readouterr().err
    assert "policy.yaml:4: membership.training_data: required: give the file" in err
    assert not out.exists() or not any(out.iterdir())
    args = check_args(files, out, "--no-mlflow", **{"training-data": str(files["train"])})
    assert main(args) in (0, 1)
    assert read_report(out)["policy"]["effective"]["membership"]["training_data"] == "required"
    # a file in which the check compares nothing would satisfy any requirement: refused
    unrelated = write_jsonl(tmp_path / "unrelated.jsonl", [{"text": "a public text"}])
    capsys.readouterr()
    args = check_args(files, out, "--no-mlflow", **{"training-data": str(unrelated)})
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "membership.training_data is required, but the training data" in err
    assert "compared nothing the generator saw" in err and not (out / "report.json").exists()


@pytest.mark.parametrize(
    "text",
    [
        "我的新地址是北京市朝阳区建国路八十八号",  # a review: written without spaces
        "Mein-Passwort-ist-Sonnenblume-bitte-nicht-weitersagen-danke",
    ],
)
def test_words_are_counted_without_spaces_too(tmp_path: Path, text: str) -> None:
    source = [*SOURCE, ("g", text, "holdout")]
    with pytest.raises(BundleError, match="line 1 holds the text of a holdout record"):
        _check(tmp_path, [{"text": text}], source_rows=source)


def test_a_template_several_holdout_users_wrote_is_weak(tmp_path: Path) -> None:
    """A review: a public row of a support template that three holdout users (and no train
    user) had written refused the file."""
    template = "Hi, I need some help with my order please, thank you."
    source = [*SOURCE, ("g", template, "holdout"), ("h", template, "holdout")]
    found = _check(tmp_path, [{"text": LONG_A}, {"text": template}], source_rows=source)
    assert (found.weak_holdout_records, found.weak_holdout_records_found) == (3, 2)
    assert found.weak_holdout_first_line == 2 and found.distinctive_holdout_records == 1


def test_markup_written_literally_is_read_as_written_too(tmp_path: Path) -> None:
    """A review: under markup: html a training text that writes "<b>" as text was read as
    HTML, lost the tag and passed."""
    html = "<p>If a &lt;b&gt; tag shows then we have a problem here</p>"
    source = [*SOURCE, ("g", html, "holdout")]
    with pytest.raises(BundleError, match="line 1 holds the text of a holdout record"):
        _check(
            tmp_path,
            [{"text": "If a <b> tag shows then we have a problem here"}],
            TextPolicy(markup="html"),
            source,
        )


def test_under_a_split_by_another_column_user_id_is_compared_too(tmp_path: Path) -> None:
    """A review: under `gate split --by author` only the author column was compared, so a
    training file that keeps each record's user_id but not its author was read blind."""
    source = write_jsonl(
        tmp_path / "all.jsonl",
        [{"author": f"a{i // 2}", "user_id": f"u{i}", "text": unique_text(i)} for i in range(40)],
    )
    split = ["split", "--source", str(source), "--by", "author", "--seed", "3"]
    assert main([*split, "--out", str(tmp_path / "split")]) == 0
    manifest = tmp_path / "split" / "split-manifest.json"
    train = [json.loads(line) for line in (tmp_path / "split" / "train.jsonl").open()]
    holdout = [json.loads(line) for line in (tmp_path / "split" / "holdout.jsonl").open()]
    rows = [{"user_id": r["user_id"], "text": r["text"]} for r in train]

    def load(rows: list[dict]):
        return load_bundle(
            manifest=manifest,
            synthetic=None,
            membership=MembershipPolicy(),
            training_data=write_jsonl(tmp_path / "trained-on.jsonl", rows),
        ).membership.training_data

    found = load(rows)
    assert (found.user_column, found.id_columns) == ("user_id", ("user_id",))
    assert (found.train_users, found.train_users_found) == (len(train), len(train))
    assert "no holdout user by user_id" in found.summary()
    leaked = [*rows, {"user_id": holdout[0]["user_id"], "text": "written after the split"}]
    with pytest.raises(
        BundleError, match=f"line {len(rows) + 1}: the 'user_id' is one of the holdout's"
    ):
        load(leaked)
    with_authors = [{**row, "author": "nobody's"} for row in rows]
    assert load(with_authors).id_columns == ("author", "user_id")


@pytest.mark.parametrize(
    "text", ["ありがとうございます", "ขอบคุณครับ", "非常感谢你的帮助", "我用iPhone拍照片很好看"]
)
def test_a_short_text_of_a_script_without_spaces_is_weak(tmp_path: Path, text: str) -> None:
    """A review: with each character a word, "thank you" in Japanese, Thai or Chinese
    refused a file whose public rows held it; two letters make a word now."""
    source = [*SOURCE, ("g", text, "holdout")]
    found = _check(tmp_path, [{"text": LONG_A}, {"text": text}], source_rows=source)
    assert (found.weak_holdout_records_found, found.weak_holdout_first_line) == (1, 2)


def test_escaped_html_in_the_source_is_read_as_shown_under_markup_none(tmp_path: Path) -> None:
    """A review: a holdout record written as escaped HTML passed against its plain text
    under the default markup: none."""
    escaped = "I don&#39;t think my <b>parcel</b> ever arrived at the depot"
    source = [*SOURCE, ("g", escaped, "holdout")]
    plain = "I don't think my parcel ever arrived at the depot"
    with pytest.raises(BundleError, match="line 2 holds the text of a holdout record"):
        _check(tmp_path, [{"text": LONG_A}, {"text": plain}], source_rows=source)


def test_run_gate_refuses_a_release_without_the_required_check(tmp_path: Path) -> None:
    """A review: the policy's requirement held for gate check, not for run_gate."""
    from gate.api import run_gate
    from gate.errors import InputError
    from gate.policy import load_policy

    files = _bundle(tmp_path)
    policy = MINIMAL_POLICY.replace(
        "audits:\n", "membership:\n  training_data: required\naudits:\n"
    )
    loaded = load_policy(write_policy(tmp_path / "policy.yaml", policy))
    load = {
        "train": files["train"],
        "holdout": files["holdout"],
        "synthetic": files["synthetic"],
        "membership": loaded.policy.membership,
        "text": loaded.policy.text,
    }
    with pytest.raises(InputError, match=r"membership\.training_data is required"):
        run_gate(loaded, load_bundle(**load))
    result = run_gate(loaded, load_bundle(**load, training_data=files["train"]))
    assert result.status in ("pass", "fail")


LONG_TRAIN = (
    "f wrote at length about the storm that closed the harbour road for three days in "
    "the second week of March"
)
LONG_HOLDOUT = (
    "g wrote at length about the clinic that moved to the old mill by the river after "
    "the flood in the autumn"
)
QUOTED = "h wrote a note of sixteen words or more that another user quoted in full in a reply"
LONG = [
    ("f", LONG_TRAIN, "train"),
    ("i", f"i replied: {QUOTED}", "train"),
    ("g", LONG_HOLDOUT, "holdout"),
    ("h", QUOTED, "holdout"),
]


def test_records_inside_a_prompt_template_are_compared(tmp_path: Path) -> None:
    """A file of templated records had compared nothing: now a record of 16 words or more
    is found within a longer row."""
    rows = [{"text": f"### Instruction: write a note.\n### Response: {LONG_TRAIN}</s>"}]
    found = _check(tmp_path, rows, source_rows=LONG)
    assert (found.train_only_records_found, found.train_only_records_within) == (1, 1)
    assert not found.saw_nothing_of_train()
    assert "(1 within longer texts)" in found.summary()


@pytest.mark.parametrize(
    "row",
    [
        f"### Response: {LONG_HOLDOUT.upper().lower()}</s>",
        f"{LONG_TRAIN}\n\n{LONG_HOLDOUT}",  # records packed into one row
        f"Re: {LONG_HOLDOUT.replace(' ', ', ', 3)}!",  # punctuation between its words
    ],
)
def test_a_holdout_record_inside_a_longer_row_is_refused(tmp_path: Path, row: str) -> None:
    rows = [{"text": LONG_TRAIN}, {"text": "public"}, {"text": row}]
    with pytest.raises(BundleError) as error:
        _check(tmp_path, rows, source_rows=LONG)
    message = str(error.value)
    assert "trained-on.jsonl: line 3 holds, within a longer text, the text of a holdout" in (
        message
    )
    assert "(this training data holds 1 such holdout record in 1 row)" in message
    assert "clinic" not in message


def test_a_holdout_text_another_user_quoted_or_a_short_one_is_no_proof_within(
    tmp_path: Path,
) -> None:
    """A train record that quotes a holdout record holds its text: a template around that
    train record is no evidence, but the holdout record in a row without the quote is (a
    review: any quote anywhere in the source had excused every row). A holdout text under
    16 words inside a longer public text is not looked for (a phrase is found in long
    texts by chance)."""
    short = " ".join(LONG_HOLDOUT.split()[:15])
    source = [*LONG, ("j", short, "holdout")]
    rows = [
        {"text": f"### Response: i replied: {QUOTED}</s>"},
        {"text": f"a public page that says {short} and goes on"},
    ]
    found = _check(tmp_path, rows, source_rows=source)
    assert (found.train_only_records_found, found.train_only_records_within) == (1, 1)
    for row in (f"public: {QUOTED}, and more", f"{LONG_HOLDOUT} and so on"):
        with pytest.raises(BundleError, match="line 2 holds, within a longer text"):
            _check(tmp_path, [rows[0], {"text": row}], source_rows=source)


TEMPLATE = (
    "<|system|>You write support replies.<|user|>Reply to the customer.<|assistant|>{}<|end|>"
)
ALPACA = "### Instruction: write a message.\n### Response: {}</s>"
SHORT_SOURCE = [  # records of under 16 words, the first two of train starting alike
    ("k", "Hi Ann, the parcel left on Monday. Thanks", "train"),
    ("l", "Hi Ann, your refund is on its way. Thanks", "train"),
    ("m", "We fixed the café's login page", "train"),
    ("n", "Hi Bo, the courier lost your order twice this week. Thanks", "holdout"),
    ("o", "Sorry!", "holdout"),
    ("p", "Sorry!", "holdout"),
]
HOLDOUT_SHORT = SHORT_SOURCE[3][1]


def test_short_records_inside_a_template_every_row_shares_are_found(tmp_path: Path) -> None:
    """Records under 16 words inside a prompt template had compared nothing (the search
    within longer rows needs 16): the template the rows share is taken off, and each row
    compared whole, even where the records share their first and last words (the two
    train rows below share ``Hi Ann,`` and ``. Thanks``)."""
    rows = [{"text": TEMPLATE.format(t)} for _, t, side in SHORT_SOURCE[:2]]
    found = _check(tmp_path, rows, source_rows=SHORT_SOURCE)
    assert (found.train_only_records_found, found.template_rows) == (2, 2)
    assert found.train_only_records_within == 0
    assert "(2 rows read inside a template)" in found.summary()
    found = _check(
        tmp_path,
        [{"text": TEMPLATE.format(t)} for t in ("We fixed the café's login page", "Sorry!")],
        source_rows=SHORT_SOURCE,
    )
    assert (found.train_only_records_found, found.weak_holdout_records_found) == (1, 2)
    assert found.weak_holdout_first_line == 2


@pytest.mark.parametrize(
    "rows",
    [
        [TEMPLATE.format(t) for _, t, _ in SHORT_SOURCE[:4]],
        # the template from half the rows: a blank row, one written otherwise, rows
        # without the end token; and rows that equal a source text left as they are
        [
            SHORT_SOURCE[0][1],
            "",
            ALPACA.format(SHORT_SOURCE[1][1]),
            "README: support replies, one per row",
            ALPACA.format(SHORT_SOURCE[2][1])[:-4],
            ALPACA.format(HOLDOUT_SHORT),
        ],
        # escaped HTML: compared as the HTML reader shows it
        [ALPACA.format(t.replace(",", "&#44;")) for _, t, _ in SHORT_SOURCE[1:4]],
    ],
)
def test_a_holdout_record_inside_a_shared_template_is_refused_at_any_length(
    tmp_path: Path, rows: list[str]
) -> None:
    with pytest.raises(BundleError) as error:
        _check(tmp_path, [{"text": row} for row in rows], source_rows=SHORT_SOURCE)
    message = str(error.value)
    line = 1 + next(i for i, row in enumerate(rows) if "courier" in row)
    assert f"line {line} holds inside the template that its rows share the text of a" in message
    assert "courier" not in message


def test_records_that_share_many_first_words_and_many_rows_are_read_inside_the_template(
    tmp_path: Path,
) -> None:
    """A greeting of ten words that every record starts with (22 word boundaries), and a
    template found on a sample of the rows (1,200 rows, the holdout record the last)."""
    greeting = "Thank you for contacting Acme support, my name is Sam and"
    source = [(f"t{i}", f"{greeting} {unique_text(i, 3)}", "train") for i in range(1_200)]
    source.append(("h", f"{greeting} {unique_text(9_999, 3)}", "holdout"))
    rows = [{"text": ALPACA.format(t)} for _, t, _ in source]
    with pytest.raises(BundleError, match="line 1201 holds inside the template"):
        _check(tmp_path, rows, source_rows=source)
    found = _check(tmp_path, rows[:-1], source_rows=source)
    assert (found.train_only_records_found, found.template_rows) == (1_200, 1_200)


QUOTING = f'Bo wrote: "{HOLDOUT_SHORT}"'


@pytest.mark.parametrize(
    "rows",
    [
        # a signature or a frame that a public row shares with a holdout text, and no train text
        [f"{HOLDOUT_SHORT} -- sent from my phone", "ok see you -- sent from my phone"],
        ["Forwarded message:", f"Forwarded message: {HOLDOUT_SHORT}"],
        # a train record that quotes the holdout one, in a frame: the cut is chosen by
        # the train text, never by a holdout one
        [f"{QUOTING} (via forum)", 'Bo wrote: "hello there" (via forum)'],
    ],
)
def test_a_template_is_placed_by_train_texts_only(tmp_path: Path, rows: list[str]) -> None:
    source = [*SHORT_SOURCE, ("q", QUOTING, "train")]
    found = _check(tmp_path, [{"text": row} for row in rows], source_rows=source)
    assert found.template_rows == int("via forum" in rows[0])


def test_rows_that_share_no_template_are_compared_as_they_are(tmp_path: Path) -> None:
    """Rows that share no prefix or suffix, or fewer than two rows that equal no source
    text, are compared as they are (a record and more is not found under 16 words)."""
    rows = [{"text": "We fixed the café's login page today"}, {"text": "Sorry! Not now"}]
    found = _check(tmp_path, rows, source_rows=SHORT_SOURCE)
    assert (found.train_only_records_found, found.template_rows) == (0, 0)
    rows = [{"text": "Hi Ann, the parcel left on Monday. Thanks"}, {"text": "Sorry! Not now"}]
    found = _check(tmp_path, rows, source_rows=SHORT_SOURCE)
    assert (found.train_only_records_found, found.template_rows) == (1, 0)
    found = _check(tmp_path, [{"text": TEMPLATE.format("Sorry!")}], source_rows=SHORT_SOURCE)
    assert (found.weak_holdout_records_found, found.template_rows) == (0, 0)


def test_a_shared_prefix_and_suffix_are_cut_by_code_point() -> None:
    texts = pa.array(["«R» héllo »", "«R» hé there »", "«R» hé »", "other"])
    # by half, three quarters, fifteen sixteenths, a quarter, an eighth, a sixteenth
    # (two at least) of the sample, then by all
    shared = ["«R» hé ", "«R» hé", "", "«R» hé ", "«R» hé ", "«R» hé ", ""]
    assert _shared_prefixes(texts, 4) == shared
    assert _shared_prefixes(texts[:3], 2) == ["«R» hé"] * 7
    ends = [text[::-1] for text in _shared_prefixes(pc.utf8_reverse(texts), 4)]
    assert ends == [" »", " »", "", " »", " »", " »", ""]
    assert _shared_prefixes(pa.array(["ab", "cd"]), 512) == [""] * 7
    assert _between(texts, "«R» ", " »").to_pylist() == ["héllo", "hé there", "hé", None]
    assert _between(texts, "«R» ", "").to_pylist() == ["héllo »", "hé there »", "hé »", None]
    assert _between(pa.array(["«R» »"]), "«R» »", " »").to_pylist() == [None]
    assert _boundaries("ab: c") == [2, 3, 4]


def test_a_few_records_among_many_public_rows_in_one_template_are_found(
    tmp_path: Path,
) -> None:
    """The cut is scored on every row while they are few enough (a sample of 512 rows
    had missed the 3 train rows among 3,000 public ones, and so the holdout row)."""
    public = [{"text": ALPACA.format(f"Hi {unique_text(i, 6)}")} for i in range(3_000)]
    ours = [{"text": ALPACA.format(t)} for _, t, _ in SHORT_SOURCE[:4]]
    rows = public[:1_500] + ours + public[1_500:]
    with pytest.raises(BundleError, match="line 1504 holds inside the template"):
        _check(tmp_path, rows, source_rows=SHORT_SOURCE)
    found = _check(tmp_path, rows[:1_503] + public, source_rows=SHORT_SOURCE)
    assert (found.train_only_records_found, found.template_rows) == (3, 3)


CHAT_ROWS = [
    {
        "messages": [
            {"role": "system", "content": "You write support replies."},
            {"role": "user", "content": "Reply to the customer."},
            {"role": "assistant", "content": text},
        ]
    }
    for _, text, _ in SHORT_SOURCE[:3]
]


def test_a_chat_file_is_read_as_the_strings_its_records_hold(tmp_path: Path) -> None:
    """A fine-tuning file in a chat format (no ``text`` column) had been refused as
    unreadable: each string of its records is a text of its own, at the record's line."""
    found = _check(tmp_path, CHAT_ROWS, source_rows=SHORT_SOURCE)
    assert (found.records, found.texts, found.train_only_records_found) == (3, 18, 3)
    assert "3 records (18 strings in their fields)" in found.summary()
    conversation = [{"from": "human", "value": "Reply."}, {"from": "gpt", "value": HOLDOUT_SHORT}]
    rows = [*CHAT_ROWS, {"conversations": conversation, "id": 7}]  # ShareGPT's format
    with pytest.raises(BundleError, match="line 4 holds the text of a holdout record"):
        _check(tmp_path, rows, source_rows=SHORT_SOURCE)


def test_instruction_columns_in_csv_and_nested_parquet_are_read(tmp_path: Path) -> None:
    source = write_jsonl(
        tmp_path / "source.jsonl",
        [{"user_id": u, "text": t, "split": side} for u, t, side in SHORT_SOURCE],
    )

    def check(trained_on: Path):
        return load_bundle(
            source=source,
            synthetic=None,
            membership=MembershipPolicy(split_check={"action": "warn"}),
            text=TextPolicy(),
            training_data=trained_on,
        ).membership.training_data

    alpaca = pd.DataFrame(
        {
            "instruction": ["Reply.", "Reply.", "Reply."],
            "input": ["", "an order", ""],
            "output": [t for _, t, _ in SHORT_SOURCE[1:4]],
        }
    )
    alpaca.to_csv(tmp_path / "alpaca.csv", index=False)
    with pytest.raises(BundleError, match=r"alpaca\.csv: line 3 holds the text of a holdout"):
        check(tmp_path / "alpaca.csv")
    nested = pd.DataFrame(
        {"messages": [[{"role": "assistant", "content": t}] for _, t, _ in SHORT_SOURCE[:3]]}
    )
    nested.loc[1, "messages"] = None
    nested.to_parquet(tmp_path / "chat.parquet")
    found = check(tmp_path / "chat.parquet")
    assert (found.records, found.texts, found.train_only_records_found) == (3, 4, 2)


def test_a_holdout_id_beside_no_string_is_still_refused(tmp_path: Path) -> None:
    rows = [*CHAT_ROWS, {"user_id": "n", "messages": []}]
    with pytest.raises(BundleError, match="line 4: the 'user_id' is one of the holdout's"):
        _check(tmp_path, rows, source_rows=SHORT_SOURCE)


HOLDOUT_TURN = {"role": "assistant", "content": HOLDOUT_SHORT}


@pytest.mark.parametrize(
    "last",
    [
        # content as a list of parts in one record, a string in the others
        {"messages": [{"role": "assistant", "content": [{"type": "text", "text": HOLDOUT_SHORT}]}]},
        # numbers beyond 64 bits, objects keyed by data
        {"messages": [HOLDOUT_TURN], "meta": {"seed": 2**70, "jill@example.org": {"x": 1}}},
        # a chat written as a JSON string (as exports to CSV or Parquet write it)
        {"messages": json.dumps([HOLDOUT_TURN])},
    ],
)
def test_records_whose_kinds_vary_are_read_too(tmp_path: Path, last: dict) -> None:
    """A review: a field that Arrow cannot give one type had been refused, or crashed
    (exit 3); such records are walked one by one instead."""
    with pytest.raises(BundleError, match="line 4 holds the text of a holdout record"):
        _check(tmp_path, [*CHAT_ROWS, last], source_rows=SHORT_SOURCE)


def test_a_template_of_one_field_is_found_among_the_others(tmp_path: Path) -> None:
    """A review: a user turn in a template (``Message: {text}``) among distinct replies
    was under half of the file's strings, so no template was found for it; it is a third
    of its key's (``content``), so the turn's speaker tells it apart."""
    source = [(f"t{i}", f"{unique_text(i, 4)} and so on", "train") for i in range(40)]
    source.append(("h", HOLDOUT_SHORT, "holdout"))

    def row(text: str, i: int) -> dict:
        system = {"role": "system", "content": f"context {i}"}
        user = {"role": "user", "content": f"Message: {text}\nWhat is its topic?"}
        return {"messages": [system, user, {"role": "assistant", "content": f"topic {i}"}]}

    rows = [row(t, i) for i, (_, t, _) in enumerate(source)]
    with pytest.raises(BundleError, match="line 41 holds inside the template that its rows"):
        _check(tmp_path, rows, source_rows=source)


def test_the_columns_beside_a_text_column_are_read_too(tmp_path: Path) -> None:
    """A file with a ``text`` column had its other columns left unread: a holdout record
    in a ``response`` or ``label`` column beside it passed. Every string column but the
    ids is read, and ``text`` still needs a string in every record."""
    rows = [
        {"text": "Reply to the customer.", "response": t, "lang": "en", "user_id": "k"}
        for _, t, _ in SHORT_SOURCE[:3]
    ]
    found = _check(tmp_path, rows, source_rows=SHORT_SOURCE)
    assert (found.records, found.texts, found.train_only_records_found) == (3, 9, 3)
    assert "3 records (9 strings in their fields)" in found.summary()
    for column in ("context", "label", "record_id"):
        beside = {**rows[2], "response": "Sorry!", column: HOLDOUT_SHORT}
        with pytest.raises(BundleError, match="line 3 holds the text of a holdout record"):
            _check(tmp_path, [*rows[:2], beside], source_rows=SHORT_SOURCE)
    beside = {**rows[2], "context": json.dumps({"turns": [HOLDOUT_SHORT]})}
    with pytest.raises(BundleError, match="line 3 holds the text of a holdout record"):
        _check(tmp_path, [*rows[:2], beside], source_rows=SHORT_SOURCE)
    beside = {**rows[2], "text": ["Reply."]}
    with pytest.raises(BundleError, match="line 3: 'text' must be a string; found a list"):
        _check(tmp_path, [*rows[:2], beside], source_rows=SHORT_SOURCE)
    found = _check(
        tmp_path, [{"text": t} for _, t, _ in SHORT_SOURCE[:3]], source_rows=SHORT_SOURCE
    )
    assert (found.records, found.texts, found.train_only_records_found) == (3, 3, 3)
    assert "strings in their fields" not in found.summary()


def test_beside_a_text_column_bytes_are_no_texts_and_json_in_it_is_a_record(
    tmp_path: Path,
) -> None:
    """A review: an image column beside ``text`` (bytes, not UTF-8) refused the file, and
    a train record written as JSON that quotes a holdout record refused it, read out of
    the JSON; neither does now. A column made the index of a Parquet file is read."""
    quoting = json.dumps({"reply_to": HOLDOUT_SHORT, "reply": "We are sorry, Bo."})

    def check(frame: pd.DataFrame, rows: list[tuple[str, str, str]] = SHORT_SOURCE):
        source = write_jsonl(
            tmp_path / "source.jsonl",
            [{"user_id": u, "text": t, "split": side} for u, t, side in rows],
        )
        frame.to_parquet(tmp_path / "trained-on.parquet")
        return load_bundle(
            source=source,
            synthetic=None,
            membership=MembershipPolicy(split_check={"action": "warn"}),
            text=TextPolicy(),
            training_data=tmp_path / "trained-on.parquet",
        ).membership.training_data

    texts = [t for _, t, _ in SHORT_SOURCE[:3]]
    image = pd.DataFrame({"text": texts, "image": [b"\x89PNG\xff\xfe"] * 3})
    assert check(image).train_only_records_found == 3
    quoted = [*SHORT_SOURCE, ("q", quoting, "train")]
    assert check(pd.DataFrame({"text": [*texts, quoting]}), quoted).train_only_records_found == 4
    indexed = pd.DataFrame({"text": texts, "prompt": ["Reply.", "Reply.", HOLDOUT_SHORT]})
    with pytest.raises(BundleError, match="line 3 holds the text of a holdout record"):
        check(indexed.set_index("prompt"))


def test_a_templated_text_column_is_cut_beside_many_metadata_keys(tmp_path: Path) -> None:
    """A review: a ``meta`` object of 20 keys before a templated ``text`` column put
    ``text`` outside the 16 fields whose templates are read, and below the smallest share
    of all rows tried; a holdout record of 10 words inside the template passed."""
    texts = [t for _, t, _ in SHORT_SOURCE[:3]] + [f"no record {i}" for i in range(20)]
    rows = [
        {
            "meta": {f"key{k}": f"value {k} of row {n}" for k in range(20)},
            "text": TEMPLATE.format(t),
        }
        for n, t in enumerate(texts)
    ]
    found = _check(tmp_path, rows, source_rows=SHORT_SOURCE)
    assert (found.train_only_records_found, found.template_rows) == (3, 3)
    rows.append({"meta": rows[0]["meta"], "text": TEMPLATE.format(HOLDOUT_SHORT)})
    with pytest.raises(BundleError, match="line 24 holds inside the template"):
        _check(tmp_path, rows, source_rows=SHORT_SOURCE)


def test_records_without_a_string_or_with_bytes_that_are_no_text_are_refused(
    tmp_path: Path,
) -> None:
    with pytest.raises(BundleError, match="no 'text' column and no string in its records"):
        _check(tmp_path, [{"n": 1}, {"n": 2.5}], source_rows=SHORT_SOURCE)
    pd.DataFrame({"body": [b"a text", b"\xff\xfe"]}).to_parquet(tmp_path / "b.parquet")
    source = write_jsonl(
        tmp_path / "source.jsonl",
        [{"user_id": u, "text": t, "split": side} for u, t, side in SHORT_SOURCE],
    )
    with pytest.raises(BundleError, match=r"line 2, column 'body': bytes that are not UTF-8"):
        load_bundle(
            source=source,
            synthetic=None,
            membership=MembershipPolicy(split_check={"action": "warn"}),
            text=TextPolicy(),
            training_data=tmp_path / "b.parquet",
        )


INSTRUCTIONS = ["Write a reply.", "Answer the ticket.", "Respond politely."]
ALPACA_OF = "### Instruction:\n{}\n\n### Response:\n{}</s>"
TICKETS = [(f"t{i}", f"Hello, ticket {unique_text(i, 2)} is done now.", "train") for i in range(30)]
TICKET_HOLDOUT = ("h", "the courier lost your order twice this week, sorry Bo", "holdout")


def test_templates_are_read_one_after_the_other(tmp_path: Path) -> None:
    """A review: three instructions, a third of the rows each, shared no template by half
    the rows; each is now read among the rows the ones before left."""
    source = [*TICKETS, TICKET_HOLDOUT]
    rows = [
        {"text": ALPACA_OF.format(INSTRUCTIONS[i % 3], t)} for i, (_, t, _) in enumerate(source)
    ]
    with pytest.raises(BundleError, match="line 31 holds inside the template that its rows"):
        _check(tmp_path, rows, source_rows=source)
    found = _check(tmp_path, rows[:-1], source_rows=source)
    assert (found.train_only_records_found, found.template_rows) == (30, 30)
    # rows that equal a train record whole, beside templated ones, count once each
    rows = [{"text": t} for _, t, _ in TICKETS[:10]] + rows[10:-1]
    found = _check(tmp_path, rows, source_rows=source)
    assert (found.train_only_records_found, found.template_rows) == (30, 20)


def test_a_row_that_another_cut_makes_a_train_record_is_read_as_it(tmp_path: Path) -> None:
    """A review: the frame ``Bo wrote: "…" (via forum)`` and the suffix alone each made one
    row a train text; the tie kept the frame, which made the quoting train record read as
    the holdout record it quotes."""
    source = [*SHORT_SOURCE, ("q", QUOTING, "train"), ("r", "hello there", "train")]
    rows = [{"text": f"{QUOTING} (via forum)"}, {"text": 'Bo wrote: "hello there" (via forum)'}]
    found = _check(tmp_path, rows, source_rows=source)
    assert (found.train_only_records_found, found.template_rows) == (2, 2)


def test_few_records_among_rows_too_many_to_score_are_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review: where the cuts are scored on a sample of the rows, records between its
    rows were missed; every row is then scored under the template all rows share."""
    import gate.data.training_data as training_data

    monkeypatch.setattr(training_data, "TEMPLATE_SAMPLE", 8)
    monkeypatch.setattr(training_data, "_SCORED_CHARACTERS", 1)
    public = [{"text": ALPACA.format(f"Public {unique_text(i, 5)}")} for i in range(200)]
    ours = [{"text": ALPACA.format(t)} for _, t, _ in SHORT_SOURCE[:4]]
    rows = public[:101] + ours + public[101:]
    with pytest.raises(BundleError, match="line 105 holds inside the template"):
        _check(tmp_path, rows, source_rows=SHORT_SOURCE)


def test_kinds_that_typed_reading_does_not_flatten_are_walked() -> None:
    """A kind whose strings the typed reading would skip (a map, a union, dictionary-encoded
    strings) is walked record by record instead: none of its strings is left unread."""
    from gate.data.record_texts import _flattened_kind

    chat = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
    assert _flattened_kind(chat) and _flattened_kind(pa.int64())
    for kind in (
        pa.map_(pa.string(), pa.string()),
        pa.list_(pa.dictionary(pa.int32(), pa.string())),
        pa.struct([("parts", pa.dense_union([pa.field("s", pa.string())]))]),
    ):
        assert not _flattened_kind(kind)
