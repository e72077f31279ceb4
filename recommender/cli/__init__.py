"""The `recommender` command line: one module per command, `main` puts them together."""

from recommender.cli.main import main

__all__ = ["main"]
