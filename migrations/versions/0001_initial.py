"""Recommendations and executions.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "recommendations",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("action_id", sa.String(256), nullable=False),
        sa.Column("execution_id", sa.String(256), nullable=False),
        sa.Column("parent_id", sa.String(36), nullable=True),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("pool_id", sa.String(256), nullable=False),
        sa.Column("gpu_model", sa.String(64), nullable=False),
        sa.Column("profile", sa.String(64), nullable=False),
        sa.Column("profile_memory_mib", sa.Integer, nullable=False),
        sa.Column("compute_slices", sa.Integer, nullable=False),
        sa.Column("memory_slices", sa.Integer, nullable=False),
        sa.Column("whole_gpu", sa.Boolean, nullable=False),
        sa.Column("count", sa.Integer, nullable=False),
        sa.Column("node_id", sa.String(256), nullable=False),
        sa.Column("resources", sa.JSON, nullable=False),
        sa.Column("predicted_peak_mib", sa.Float, nullable=False),
        sa.Column("quantile", sa.Float, nullable=False),
        sa.Column("source", sa.String(32), nullable=False),
        sa.Column("model_version", sa.String(64), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("ladder", sa.JSON, nullable=False),
        sa.Column("oom_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("oom_observed_peak_mib", sa.Float, nullable=True),
    )
    op.create_index("ix_recommendations_action_created", "recommendations",
                    ["action_id", "created_at"])
    op.create_index("ix_recommendations_created", "recommendations", ["created_at"])
    op.create_index("ix_recommendations_parent", "recommendations", ["parent_id"])
    op.create_table(
        "executions",
        sa.Column("execution_id", sa.String(256), primary_key=True),
        sa.Column("action_id", sa.String(256), nullable=False),
        sa.Column("recommendation_id", sa.String(36), nullable=False),
        sa.Column("gpu_model", sa.String(64), nullable=False),
        sa.Column("profile", sa.String(64), nullable=False),
        sa.Column("slice_memory_mib", sa.Integer, nullable=False),
        sa.Column("count", sa.Integer, nullable=False),
        sa.Column("peak_memory_mib", sa.Float, nullable=False),
        sa.Column("sm_utilization", sa.Float, nullable=False),
        sa.Column("duration_s", sa.Float, nullable=False),
        sa.Column("throughput", sa.Float, nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("features", sa.JSON, nullable=False),
    )
    op.create_index("ix_executions_action_ended", "executions", ["action_id", "ended_at"])
    op.create_index("ix_executions_recommendation", "executions", ["recommendation_id"])


def downgrade() -> None:
    op.drop_index("ix_executions_recommendation", table_name="executions")
    op.drop_index("ix_executions_action_ended", table_name="executions")
    op.drop_table("executions")
    op.drop_index("ix_recommendations_parent", table_name="recommendations")
    op.drop_index("ix_recommendations_created", table_name="recommendations")
    op.drop_index("ix_recommendations_action_created", table_name="recommendations")
    op.drop_table("recommendations")
