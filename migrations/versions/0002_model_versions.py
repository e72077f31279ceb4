"""Learned model versions.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "model_versions",
        sa.Column("version", sa.String(64), primary_key=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("promoted", sa.Boolean, nullable=False),
        sa.Column("serving", sa.Boolean, nullable=False),
        sa.Column("metrics", sa.JSON, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("training_window_start", sa.DateTime(timezone=True), nullable=True),
        sa.Column("training_window_end", sa.DateTime(timezone=True), nullable=True),
        sa.Column("params", sa.JSON, nullable=False),
    )
    op.create_index("ix_model_versions_kind_created", "model_versions", ["kind", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_model_versions_kind_created", table_name="model_versions")
    op.drop_table("model_versions")
