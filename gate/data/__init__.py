"""Release bundles: loading, validation, fingerprints and the membership split."""
