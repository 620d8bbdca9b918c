"""The (ε, δ) profile audit (it trains generators in its generator mode, so it sits above
``gate.generators``, next to the canary audit)."""
