"""Example gate plug-in (see tests/test_plugins.py and the README's "Extending gate")."""
