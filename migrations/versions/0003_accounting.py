"""Accounting and throughput on recommendations: compute slices per card, node GPUs, throughput.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("recommendations") as batch:
        batch.add_column(sa.Column("card_compute_slices", sa.Integer, nullable=False,
                                   server_default="0"))
        batch.add_column(sa.Column("node_gpus", sa.Integer, nullable=False, server_default="0"))
        batch.add_column(sa.Column("predicted_throughput", sa.Float, nullable=False,
                                   server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("recommendations") as batch:
        batch.drop_column("predicted_throughput")
        batch.drop_column("node_gpus")
        batch.drop_column("card_compute_slices")
