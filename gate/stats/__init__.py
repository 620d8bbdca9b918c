"""Pure statistics (numpy/scipy, no I/O, randomness passed in). Imports nothing of the project."""
