"""What the population prior learns from: each recommendation's declared memory, and an index
for reading the most recent executions across actions.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("recommendations") as batch:
        batch.add_column(sa.Column("declared_memory_mib", sa.BigInteger(), nullable=False,
                                   server_default="0"))
    op.create_index("ix_executions_ended", "executions", ["ended_at"])


def downgrade() -> None:
    op.drop_index("ix_executions_ended", table_name="executions")
    with op.batch_alter_table("recommendations") as batch:
        batch.drop_column("declared_memory_mib")
