"""Evaluation: retrieval metrics, caption metrics, tables and plots. Depends only on file formats."""
