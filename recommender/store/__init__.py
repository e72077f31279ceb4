"""SQL storage: SQLAlchemy 2 models, queries, and Alembic migrations."""

from recommender.core.domain import StoreUnavailable
from recommender.store.database import connect, migrate
from recommender.store.repository import SqlStore

__all__ = ["SqlStore", "StoreUnavailable", "connect", "migrate"]
