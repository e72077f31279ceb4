"""A young action's model chance beside the stated one (core.calibration), and an index on
young actions' first attempts for the read of the record.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


YOUNG_FIRST = "model_oom_chance IS NOT NULL"


def upgrade() -> None:
    with op.batch_alter_table("recommendations") as batch:
        batch.add_column(sa.Column("model_oom_chance", sa.Float(), nullable=True))
    # The calibration read walks only young actions' first attempts, newest first.
    op.create_index("ix_recommendations_young_first", "recommendations", ["created_at"],
                    postgresql_where=sa.text(YOUNG_FIRST), sqlite_where=sa.text(YOUNG_FIRST))


def downgrade() -> None:
    op.drop_index("ix_recommendations_young_first", table_name="recommendations")
    with op.batch_alter_table("recommendations") as batch:
        batch.drop_column("model_oom_chance")
