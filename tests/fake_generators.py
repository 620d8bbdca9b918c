"""Test doubles of the generator interface (no torch): they let the remediation loop's
logic be tested in seconds. The real generator is tested in test_generators.py."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from gate.generators.base import (
    DpSgdSpec,
    FitReport,
    Generator,
    GeneratorConfig,
    GeneratorError,
    ParametricGenerator,
    PrivacySpent,
)
from gate.progress import Progress

GENERIC = "thank you for your message we will look into it and reply soon"


class ParrotConfig(GeneratorConfig):
    fail_with: str | None = Field(
        None,
        description="'diverge', 'empty', 'interrupt', 'blank' (invisible text, no error), "
        "'constant' (one line for every record), "
        "'nan_epsilon' or 'delta_above' (an accountant's impossible report), 'record_unit' "
        "(record-level DP)",
    )
    private_copies: float = Field(0.0, ge=0, le=1, description="Share of train copied under DP.")


class ParrotGenerator(ParametricGenerator[ParrotConfig]):
    """Round 0 copies train records verbatim (a generator that memorises); under a DP
    spec it copies a share ``private_copies`` of them and otherwise writes a generic line.
    Its "accountant" reports the target as spent (a test double, not an accountant)."""

    name = "parrot"
    config_model = ParrotConfig

    def __init__(self, config: ParrotConfig, *, seed: int) -> None:
        super().__init__(config, seed=seed)
        self.records: list[str] = []
        self.private = False
        self.theta = np.zeros(4)
        self.fitted = self.theta.copy()

    def fit(
        self,
        users: Sequence[Sequence[str]],
        *,
        epochs: int,
        privacy: DpSgdSpec | None = None,
        progress: Progress | None = None,
    ) -> FitReport:
        if self.config.fail_with == "diverge":
            raise GeneratorError("training diverged: loss nan at epoch 1, step 1")
        self.records = [r for user in users for r in user]
        self.private = privacy is not None
        lengths = np.array([len(r) for r in self.records], dtype=np.float64)
        self.theta = np.array([lengths.mean(), lengths.std(), len(users), 1.0])
        self.fitted = self.theta.copy()
        spent = None
        if privacy is not None:
            spent = PrivacySpent(
                accountant=privacy.accountant,
                epsilon=float("nan") if self.config.fail_with == "nan_epsilon" else privacy.epsilon,
                delta=privacy.delta * (2 if self.config.fail_with == "delta_above" else 1),
                noise_multiplier=1.0,
                sample_rate=0.1,
                steps=10,
                max_grad_norm=privacy.max_grad_norm,
                unit="record" if self.config.fail_with == "record_unit" else "user",
            )
        return FitReport(
            epochs=epochs,
            steps=10,
            losses=(1.0,) * epochs,
            seconds=0.0,
            examples=len(users),
            privacy=spent,
        )

    def sample(
        self, n: int, *, prompts: Sequence[str] | None = None, progress: Progress | None = None
    ) -> list[str]:
        if self.config.fail_with == "empty":
            raise GeneratorError(
                f"the generator produced {n} empty records of {n} after 5 attempts"
            )
        if self.config.fail_with == "interrupt":
            raise KeyboardInterrupt
        if self.config.fail_with == "blank" and self.private:
            return ["\u200b"] * n
        if self.config.fail_with == "constant":
            return [GENERIC] * n
        rng = np.random.default_rng(self.seed)
        copies = self.config.private_copies if self.private else 1.0
        noisy = float(np.linalg.norm(self.theta - self.fitted)) > 1.0  # RIP noise destroyed it
        out = []
        for i in range(n):
            if not noisy and rng.random() < copies:
                out.append(self.records[i % len(self.records)])
            else:
                out.append(f"{GENERIC} {i}")
        return out

    def perplexity(self, texts: Sequence[str]) -> float | None:
        return 2.0 if self.private else 1.5

    def parameter_vector(self) -> np.ndarray:
        return self.theta.copy()

    def set_parameter_vector(self, vector: np.ndarray) -> None:
        self.theta = np.asarray(vector, dtype=np.float64).copy()

    def save(self, directory: Path) -> None:
        (directory / "parrot.txt").write_text("private" if self.private else "plain")
        (directory / "theta.txt").write_text(" ".join(repr(float(v)) for v in self.theta))

    @classmethod
    def load(cls, directory: Path) -> Any:
        return cls(ParrotConfig(), seed=0)


class EchoGenerator(Generator[ParrotConfig]):
    """A generator that does not expose its parameters (the rip method must refuse it)."""

    name = "echo"
    config_model = ParrotConfig

    def fit(
        self,
        users: Sequence[Sequence[str]],
        *,
        epochs: int,
        privacy: DpSgdSpec | None = None,
        progress: Progress | None = None,
    ) -> FitReport:
        self.records = [r for user in users for r in user]
        return FitReport(epochs=epochs, steps=1, losses=(1.0,), seconds=0.0, examples=len(users))

    def sample(
        self, n: int, *, prompts: Sequence[str] | None = None, progress: Progress | None = None
    ) -> list[str]:
        return [self.records[i % len(self.records)] for i in range(n)]

    def save(self, directory: Path) -> None:
        (directory / "echo.txt").write_text("echo")

    @classmethod
    def load(cls, directory: Path) -> Any:
        return cls(ParrotConfig(), seed=0)
