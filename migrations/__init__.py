"""Alembic migrations (shipped inside the package as recommender.migrations)."""
