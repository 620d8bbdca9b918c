"""The generator plug-in interface: fit on users' records (optionally with DP-SGD), sample
records, save and load; optionally expose the parameter vector for RIP noise.

A generator is found by name in :data:`gate.plugins.GENERATORS` (built-in ``reference``,
an entry point in the group ``gate.generators``) or by an import path ``module:Class``.
The unit of privacy is the gate's: the **user**. :meth:`Generator.fit` receives one
sequence of records per user; a DP-SGD fit must treat each user as one example.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Any, ClassVar, Generic, Literal, TypeVar

import numpy as np

from gate.errors import AuditError
from gate.policy.models import StrictModel
from gate.progress import NullProgress, Progress
from gate.seeds import stream_seed


class GeneratorStream(IntEnum):
    """The random streams of a generator: stream ``k`` of a generator seeded ``s`` is seeded
    by :func:`gate.seeds.stream_seed` ``(s, k)``."""

    INITIALISATION = 0
    BATCHES = 1
    NOISE = 2
    SAMPLING = 3


def generator_stream_seed(seed: int, stream: GeneratorStream) -> int:
    """The seed of ``stream`` of a generator seeded ``seed`` (e.g. the DP-SGD noise seed a
    caller passes in :class:`DpSgdSpec` when the noise may be reproducible)."""
    return stream_seed(seed, int(stream))


class GeneratorConfig(StrictModel):
    """Base of a generator's configuration (``remediation.generator_config``)."""


ConfigT = TypeVar("ConfigT", bound=GeneratorConfig)


class GeneratorError(AuditError):
    """Training diverged, sampling produced no text, or a checkpoint is unusable (exit 3)."""


@dataclass(frozen=True)
class DpSgdSpec:
    """What a DP-SGD fit must guarantee: (``epsilon``, ``delta``)-DP at the user level.

    Args:
        epsilon: target ε for the whole training.
        delta: target δ.
        max_grad_norm: per-user clipping norm C.
        accountant: Opacus accountant that solves the noise multiplier and reports ε
            (``prv`` or ``rdp``).
        noise_seed: seeds the Gaussian noise (the Poisson batches then follow the
            generator's seed); None (the default) draws both from the operating system's
            entropy and records nothing of it. The guarantee holds only against an
            adversary who cannot reproduce the noise: a seed recorded in the evidence or
            the checkpoint lets its reader subtract it.
    """

    epsilon: float
    delta: float
    max_grad_norm: float = 1.0
    accountant: Literal["prv", "rdp"] = "prv"
    noise_seed: int | None = None


@dataclass(frozen=True)
class PrivacySpent:
    """The privacy a DP-SGD fit actually spent, as its accountant reports it. ``unit`` is
    what one DP example is: ``"user"`` (all of a user's records, the gate's unit, the only
    one a remediation round accepts) or ``"record"``."""

    accountant: str
    epsilon: float
    delta: float
    noise_multiplier: float
    sample_rate: float
    steps: int
    max_grad_norm: float
    unit: Literal["user", "record"]

    def as_dict(self) -> dict[str, Any]:
        return {
            "accountant": self.accountant,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "noise_multiplier": self.noise_multiplier,
            "sample_rate": self.sample_rate,
            "steps": self.steps,
            "max_grad_norm": self.max_grad_norm,
            "unit": self.unit,
        }


@dataclass(frozen=True)
class FitReport:
    """What a fit did: epochs, optimiser steps, the mean training loss of each epoch, and
    the privacy spent (None for a non-private fit)."""

    epochs: int
    steps: int
    losses: tuple[float, ...]
    seconds: float
    examples: int
    privacy: PrivacySpent | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "epochs": self.epochs,
            "steps": self.steps,
            # a private fit's losses are exact statistics of the train users, which its
            # epsilon does not cover: not released
            "losses": list(self.losses) if self.privacy is None else None,
            "seconds": self.seconds,
            "examples": self.examples,
            "privacy": None if self.privacy is None else self.privacy.as_dict(),
            "details": self.details,
        }


class Generator(ABC, Generic[ConfigT]):
    """A text generator the remediation loop can train, sample and perturb.

    Subclasses set :attr:`name` and :attr:`config_model` and implement :meth:`fit`,
    :meth:`sample`, :meth:`save` and :meth:`load`. :meth:`perplexity` (a utility
    measure) and the parameter-vector pair (needed by the ``rip`` method) are optional.

    Args:
        config: the validated configuration.
        seed: seeds every random step of this generator (initialisation, batches, noise,
            sampling), each from its own :class:`GeneratorStream`; recorded in the evidence.
    """

    name: ClassVar[str]
    config_model: ClassVar[type[GeneratorConfig]] = GeneratorConfig

    def __init__(self, config: ConfigT, *, seed: int) -> None:
        if seed < 0:
            raise ValueError(f"seed must be >= 0; found {seed}")
        self.config = config
        self.seed = seed

    @abstractmethod
    def fit(
        self,
        users: Sequence[Sequence[str]],
        *,
        epochs: int,
        privacy: DpSgdSpec | None = None,
        progress: Progress | None = None,
    ) -> FitReport:
        """Train from scratch on ``users`` (one sequence of records per user).

        Raises:
            GeneratorError: training diverged (a loss that is not finite).
        """

    @abstractmethod
    def sample(
        self,
        n: int,
        *,
        prompts: Sequence[str] | None = None,
        progress: Progress | None = None,
    ) -> list[str]:
        """``n`` records; with ``prompts`` (length ``n``), record ``i`` continues prompt ``i``.

        Raises:
            GeneratorError: the generator produced empty records.
        """

    @abstractmethod
    def save(self, directory: Path) -> None:
        """Write everything :meth:`load` needs into ``directory`` (which exists)."""

    @classmethod
    @abstractmethod
    def load(cls, directory: Path) -> Generator[Any]:
        """A generator saved by :meth:`save`."""

    def perplexity(self, texts: Sequence[str]) -> float | None:
        """Per-token perplexity on ``texts`` (None if the generator cannot say)."""
        return None

    @classmethod
    def supports_parameter_noise(cls) -> bool:
        """Whether the rip method can perturb this generator's parameters."""
        return issubclass(cls, ParametricGenerator)


class ParametricGenerator(Generator[ConfigT]):
    """A generator whose trainable parameters can be read and replaced as one vector: what
    the rip method needs to release ``θ + r·U``."""

    @abstractmethod
    def parameter_vector(self) -> np.ndarray:
        """All trainable parameters as one float64 vector."""

    @abstractmethod
    def set_parameter_vector(self, vector: np.ndarray) -> None:
        """Replace the parameters by ``vector`` (same layout as :meth:`parameter_vector`)."""


def null_progress(progress: Progress | None) -> Progress:
    return progress or NullProgress()
