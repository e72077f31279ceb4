"""A young action's model chance beside the stated one (core.calibration).

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


def upgrade() -> None:
    with op.batch_alter_table("recommendations") as batch:
        batch.add_column(sa.Column("model_oom_chance", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("recommendations") as batch:
        batch.drop_column("model_oom_chance")
