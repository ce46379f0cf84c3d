"""Stage one: label spaces, samplers, losses, the embedding model and its training."""
