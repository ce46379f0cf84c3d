"""A toy loss and a toy dataset reader, each one file, as a user adds them (tests/test_plugins.py)."""
