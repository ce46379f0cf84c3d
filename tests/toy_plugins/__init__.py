"""A toy loss and a toy dataset reader, each one file, as a user adds them (tests/capaware/test_plugins.py)."""
