"""Placeholder package: built by a later issue (see README, roadmap)."""
