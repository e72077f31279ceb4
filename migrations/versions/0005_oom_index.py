"""A partial index on the recommendations that ran out of memory, per action.

Recommend reads an action's OOMs on every call; without it the query walked every
recommendation the action ever had (16 ms at 50,000 on SQLite).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_recommendations_action_oom", "recommendations", ["action_id", "oom_at"],
                    postgresql_where=sa.text("oom_at IS NOT NULL"),
                    sqlite_where=sa.text("oom_at IS NOT NULL"))


def downgrade() -> None:
    op.drop_index("ix_recommendations_action_oom", table_name="recommendations")
