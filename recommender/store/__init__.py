"""SQL storage: SQLAlchemy 2 models, queries, and Alembic migrations."""

from recommender.store.database import StoreUnavailable, connect, migrate
from recommender.store.repository import SqlStore

__all__ = ["SqlStore", "StoreUnavailable", "connect", "migrate"]
