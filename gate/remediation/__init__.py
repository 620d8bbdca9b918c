"""The remediation loop: retrain the generator with DP-SGD or add RIP noise, regenerate,
gate again (docs/methods.md §10). The loop is given the gate evaluation as a function, so
this package never imports the api that wires it."""
