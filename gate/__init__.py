"""gate: a pre-release privacy gate for synthetic text releases."""

from gate._version import __version__

__all__ = ["__version__", "run_gate"]


def __getattr__(name: str):  # lazy: `import gate` stays cheap for the CLI
    if name == "run_gate":
        from gate.api import run_gate

        return run_gate
    raise AttributeError(f"module 'gate' has no attribute {name!r}")
