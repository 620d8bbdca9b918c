"""RIP noise on a trained generator (*Provable Re-Identification Privacy*, §4): estimate the
spread of the parameters over models trained on random halves of train, then release
``θ + r·U`` (Algorithm 1, isotropic; or Corollary 8, per coordinate), with the radius law
of Theorem 7 (Gamma(d, scale); see :mod:`gate.stats.rip`). The statistics (σ, the radius,
the direction) are in :mod:`gate.stats.rip`; this module trains and perturbs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from gate.generators.base import GeneratorConfig, GeneratorError, ParametricGenerator
from gate.progress import Progress
from gate.stats._validate import StatsError
from gate.stats.rip import (
    cor8_noise,
    cor8_scale,
    isotropic_noise,
    isotropic_scale,
    replica_coordinate_sigma,
    replica_sigma,
)


@dataclass(frozen=True)
class ReplicaSpread:
    """Parameters of B models trained on random halves of the train users (Algorithm 1
    step 1): the isotropic σ and the per-coordinate σ_i."""

    replicas: int
    sigma: float
    coordinate_sigma: np.ndarray
    half_size: int


def half_subsets(n_users: int, *, replicas: int, rng: np.random.Generator) -> list[np.ndarray]:
    """``replicas`` random subsets of ``n_users // 2`` users each (sorted indices)."""
    if n_users < 2:
        raise ValueError(f"RIP noise needs at least 2 train users; found {n_users}")
    half = n_users // 2
    return [np.sort(rng.choice(n_users, size=half, replace=False)) for _ in range(replicas)]


def replica_spread(
    generator_cls: type[ParametricGenerator[Any]],
    config: GeneratorConfig,
    users: Sequence[Sequence[str]],
    *,
    epochs: int,
    replicas: int,
    seed: int,
    progress: Progress,
) -> ReplicaSpread:
    """Train ``replicas`` generators on random halves of ``users`` (the halves drawn from
    a child of ``seed``; every replica trained from ``seed``, the full model's, so that σ
    measures the data's influence, not the initialisation's) and measure the parameters'
    spread."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 1]))
    subsets = half_subsets(len(users), replicas=replicas, rng=rng)
    vectors = []
    for b, subset in enumerate(subsets):
        with progress.step(f"RIP replica {b + 1}/{replicas} (random half of train)"):
            replica = generator_cls(config, seed=seed)
            replica.fit([users[i] for i in subset], epochs=epochs, progress=progress)
            vectors.append(replica.parameter_vector())
    theta = np.stack(vectors)
    try:
        sigma = replica_sigma(theta)
    except StatsError as exc:
        raise GeneratorError(
            f"the {replicas} RIP replicas trained on random halves of the {len(users)} train "
            f"users: {exc} (the generator's training diverged)"
        ) from None
    if sigma == 0:
        raise GeneratorError(
            f"the {replicas} RIP replicas trained on random halves of the {len(users)} train "
            "users came out identical (σ = 0), which would add no noise; RIP needs more "
            "train users or more replicas (remediation.rip.replicas)"
        )
    return ReplicaSpread(
        replicas=replicas,
        sigma=sigma,
        coordinate_sigma=replica_coordinate_sigma(theta, floor=1e-8),
        half_size=int(subsets[0].size),
    )


@dataclass(frozen=True)
class RipNoise:
    """What was added: the target η, the noise form, the scale of the radius law
    (``Gamma(parameters, scale)``, in the norm of the noise form) and the drawn radius, and
    the Euclidean norm of the perturbation."""

    eta: float
    noise: str
    radius_scale: float
    radius: float
    perturbation_norm: float
    parameters: int

    def as_dict(self, *, with_draw: bool = True) -> dict[str, Any]:
        """The record; ``with_draw=False`` leaves out the drawn radius and norm, which
        tell a reader who can retrain on a candidate dataset D whether
        ‖θ′ − θ_D‖ is the norm drawn (it is then D)."""
        drawn = {"radius": self.radius, "perturbation_norm": self.perturbation_norm}
        return {
            "eta": self.eta,
            "noise": self.noise,
            "radius_law": "gamma",
            "radius_scale": self.radius_scale,
            "radius_mean": self.radius_scale * self.parameters,
            **(drawn if with_draw else {}),
            "parameters": self.parameters,
        }


def add_rip_noise(
    generator: ParametricGenerator[Any],
    spread: ReplicaSpread,
    *,
    eta: float,
    noise: Literal["isotropic", "per_coordinate"],
    rng: np.random.Generator,
) -> RipNoise:
    """Replace the generator's parameters θ by ``θ + r·U`` for η-RIP."""
    theta = generator.parameter_vector()
    if noise == "isotropic":
        x = isotropic_noise(dimension=theta.size, sigma=spread.sigma, eta=eta, rng=rng)
        scale = isotropic_scale(sigma=spread.sigma, eta=eta)
        radius = float(np.linalg.norm(x))
    else:
        x = cor8_noise(sigma=spread.coordinate_sigma, eta=eta, rng=rng)
        scale = cor8_scale(eta=eta)
        sd = spread.coordinate_sigma
        radius = float(np.sqrt(np.sum(x**2 / (sd.size * sd**2))))
    generator.set_parameter_vector(theta + x)
    return RipNoise(
        eta=eta,
        noise=noise,
        radius_scale=float(scale),
        radius=radius,
        perturbation_norm=float(np.linalg.norm(x)),
        parameters=int(theta.size),
    )
