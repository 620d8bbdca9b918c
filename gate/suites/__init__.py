"""Policies as Great Expectations suites: the GX validation result decides the verdict."""
