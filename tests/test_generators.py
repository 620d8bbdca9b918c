"""The reference generator (a real transformers Llama over bytes, real Opacus DP-SGD) on
tiny data, and the generator registry."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("opacus")

from gate.errors import InputError
from gate.generators import resolve_generator
from gate.generators.base import DpSgdSpec, GeneratorError
from gate.generators.reference import (
    BOS,
    EOS,
    SEP,
    ReferenceConfig,
    ReferenceGenerator,
    _cosine_rate,
    decode_record,
    encode_user,
)
from gate.plugins import GENERATORS
from gate.registry import PluginUnavailableError

TINY = ReferenceConfig(layers=1, hidden=32, heads=2, max_length=48, batch_size=4)
USERS = [[f"note {i}: all is well", f"second line {i}"] for i in range(12)]


def test_user_encoding_is_bytes_with_separators() -> None:
    ids = encode_user(["hé", "x"], max_length=100)
    assert ids == [BOS, 104, 0xC3, 0xA9, SEP, 120, EOS]
    assert encode_user(["abcdef"], max_length=4) == [BOS, 97, 98, 99]
    assert decode_record([104, 0xC3, 0xA9, SEP, 120]) == "hé"
    assert decode_record([0xC3, 104]) == "h"  # a broken UTF-8 sequence is dropped


def test_config_rejects_heads_that_do_not_divide_hidden() -> None:
    with pytest.raises(ValueError, match="must divide hidden"):
        ReferenceConfig(hidden=100, heads=3)


def test_fit_sample_save_load(tmp_path: Path) -> None:
    generator = ReferenceGenerator(TINY, seed=1)
    report = generator.fit(USERS, epochs=2)
    assert report.examples == 12 and report.steps == 6 and report.privacy is None
    assert all(np.isfinite(report.losses))
    texts = generator.sample(5)
    assert len(texts) == 5 and all(t for t in texts)
    assert generator.sample(5) == texts  # seeded
    assert generator.perplexity(["note 3: all is well"]) > 1.0
    generator.save(tmp_path)
    loaded = ReferenceGenerator.load(tmp_path)
    np.testing.assert_array_equal(loaded.parameter_vector(), generator.parameter_vector())
    assert loaded.sample(5) == texts


def test_parameter_vector_round_trip() -> None:
    generator = ReferenceGenerator(TINY, seed=2)
    generator.fit(USERS[:4], epochs=1)
    theta = generator.parameter_vector()
    generator.set_parameter_vector(theta + 1.0)
    np.testing.assert_allclose(generator.parameter_vector(), theta + 1.0, atol=1e-6)
    with pytest.raises(ValueError, match="shape"):
        generator.set_parameter_vector(theta[:-1])


def test_same_seed_same_model() -> None:
    a = ReferenceGenerator(TINY, seed=5)
    b = ReferenceGenerator(TINY, seed=5)
    a.fit(USERS, epochs=1)
    b.fit(USERS, epochs=1)
    np.testing.assert_array_equal(a.parameter_vector(), b.parameter_vector())


def test_cosine_rate_decays_from_the_rate_to_zero() -> None:
    assert _cosine_rate(0.004, step=0, steps=10) == pytest.approx(0.004)
    assert _cosine_rate(0.004, step=5, steps=10) == pytest.approx(0.002)
    assert _cosine_rate(0.004, step=10, steps=10) == pytest.approx(0.0, abs=1e-18)
    assert _cosine_rate(0.004, step=13, steps=10) == pytest.approx(0.0, abs=1e-18)


@pytest.mark.parametrize("private", [False, True])
def test_cosine_schedule_reaches_the_optimizer(private: bool) -> None:
    """The schedule reaches the optimizer (also Opacus's DP optimizer): from the same seed,
    cosine and constant fits end at different parameters."""
    cosine = TINY.model_copy(update={"lr_schedule": "cosine"})
    privacy = DpSgdSpec(epsilon=8.0, delta=1e-3, noise_seed=5) if private else None
    a, b = ReferenceGenerator(TINY, seed=4), ReferenceGenerator(cosine, seed=4)
    a.fit(USERS, epochs=2, privacy=privacy)
    b.fit(USERS, epochs=2, privacy=privacy)
    assert not np.array_equal(a.parameter_vector(), b.parameter_vector())
    assert np.isfinite(b.parameter_vector()).all()


@pytest.mark.slow
def test_dp_noise_is_secret_unless_seeded() -> None:
    """Without a noise seed, two DP fits of one generator seed differ (the noise and the
    Poisson batches come from the operating system's entropy, which no record holds); with
    one they are identical. A private fit's losses are not in its record."""

    def fitted(spec: DpSgdSpec) -> tuple[np.ndarray, dict]:
        generator = ReferenceGenerator(TINY, seed=4)
        report = generator.fit(USERS, epochs=1, privacy=spec)
        return generator.parameter_vector(), report.as_dict()

    secret = DpSgdSpec(epsilon=8.0, delta=1e-3)
    (a, record), (b, _) = fitted(secret), fitted(secret)
    assert not np.array_equal(a, b)
    assert record["losses"] is None and record["privacy"]["epsilon"] <= 8.0 * 1.01
    seeded = DpSgdSpec(epsilon=8.0, delta=1e-3, noise_seed=11)
    assert np.array_equal(fitted(seeded)[0], fitted(seeded)[0])


@pytest.mark.parametrize("mode", ["hooks", "functorch"])
def test_an_empty_poisson_batch_is_a_step_of_noise(mode: str) -> None:
    """At q = 1/12 about a third of the Poisson batches are empty. Each is a step of noise
    alone, as DP-SGD's analysis assumes; they were skipped, which showed that no user was
    sampled (16 steps of the 24 planned with this seed)."""
    config = TINY.model_copy(update={"batch_size": 1, "grad_sample_mode": mode})
    generator = ReferenceGenerator(config, seed=3)
    spec = DpSgdSpec(epsilon=4.0, delta=1 / 12, noise_seed=1)
    report = generator.fit(USERS, epochs=2, privacy=spec)
    assert report.privacy is not None and report.privacy.sample_rate == pytest.approx(1 / 12)
    assert report.steps == report.privacy.steps == 24
    assert report.privacy.epsilon <= 4.0 * 1.01 and np.isfinite(generator.parameter_vector()).all()


@pytest.mark.parametrize("mode", ["hooks", "functorch"])
def test_dp_fit_spends_at_most_the_target(mode: str) -> None:
    generator = ReferenceGenerator(TINY.model_copy(update={"grad_sample_mode": mode}), seed=3)
    spec = DpSgdSpec(epsilon=4.0, delta=1 / 12, max_grad_norm=1.0, accountant="prv")
    report = generator.fit(USERS, epochs=2, privacy=spec)
    spent = report.privacy
    assert spent is not None and spent.unit == "user"
    assert 0 < spent.epsilon <= 4.0 * 1.01
    assert spent.noise_multiplier > 0 and spent.sample_rate == pytest.approx(4 / 12)
    # Opacus's accountant, re-run on what was done, reports the same epsilon
    from opacus.accountants import PRVAccountant

    accountant = PRVAccountant()
    accountant.history = [(spent.noise_multiplier, spent.sample_rate, spent.steps)]
    assert accountant.get_epsilon(delta=spent.delta) == pytest.approx(spent.epsilon, rel=1e-6)
    assert all(t for t in generator.sample(3))


def test_a_privacy_budget_opacus_cannot_reach_is_a_generator_error() -> None:
    """A review: "The privacy budget is too low" from Opacus was an unexpected ValueError,
    its message withheld, with no word of the setting to change."""
    generator = ReferenceGenerator(TINY, seed=3)
    spec = DpSgdSpec(epsilon=0.1, delta=1e-5, max_grad_norm=1.0, accountant="rdp")
    with pytest.raises(GeneratorError, match=r"rdp accountant finds no noise for epsilon 0.1"):
        generator.fit(USERS, epochs=2, privacy=spec)


def test_diverging_training_is_an_error() -> None:
    generator = ReferenceGenerator(TINY.model_copy(update={"learning_rate": 1e30}), seed=4)
    with pytest.raises(GeneratorError, match="diverged"):
        generator.fit(USERS, epochs=3)


def test_unfitted_generator_cannot_sample() -> None:
    with pytest.raises(GeneratorError, match="not been fitted"):
        ReferenceGenerator(TINY, seed=0).sample(1)


def test_resolve_generator_by_name_and_path() -> None:
    assert resolve_generator("reference") is ReferenceGenerator
    parrot = resolve_generator("tests.fake_generators:ParrotGenerator")
    assert parrot.name == "parrot" and parrot.supports_parameter_noise()
    echo = resolve_generator("tests.fake_generators:EchoGenerator", where="policy.yaml")
    assert not echo.supports_parameter_noise()
    with pytest.raises(InputError, match="unknown generator"):
        resolve_generator("gpt-17")


def test_a_registered_generator_that_is_not_one_is_a_broken_installation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bad import path in a policy is bad input (exit 2); a registered plug-in that is
    not a Generator is an installation the gate cannot run (exit 3)."""
    monkeypatch.setitem(GENERATORS._loaded, "impostor", dict)
    with pytest.raises(PluginUnavailableError, match="'impostor' is not a subclass"):
        resolve_generator("impostor")
    with pytest.raises(InputError, match="is not a subclass"):
        resolve_generator("json:loads")


def test_importing_opacus_leaves_the_root_logger_alone() -> None:
    """Opacus calls logging.basicConfig at import; through the generator it must not, or
    other libraries' INFO records reach the user's terminal."""
    code = (
        "import logging; from gate.generators.reference import privacy_engine_class; "
        "privacy_engine_class(); import opacus.utils.module_utils; "
        "print(len(logging.getLogger().handlers))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "0"
