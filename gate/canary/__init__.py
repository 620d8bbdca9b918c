"""The canary audit (Canary's Echo): craft canaries, train the generator with a random half,
and measure membership from the synthetic release alone."""
