"""The chance of an OOM each recommendation stated for its slice.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("recommendations") as batch:
        batch.add_column(sa.Column("oom_chance", sa.Float(), nullable=False,
                                   server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("recommendations") as batch:
        batch.drop_column("oom_chance")
