from gate.cli import entry

entry()
