"""One rung per parent recommendation: concurrent NextAfterOom retries get the same answer.

Replaces the plain index on parent_id with a unique one (NULLs, first attempts, do not clash).
Where duplicates already exist, all but the oldest rung of a parent lose their parent link
first, so the index can be built; they stay in the history as recommendations.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-29
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "UPDATE recommendations SET parent_id = NULL WHERE parent_id IS NOT NULL AND id NOT IN ("
        " SELECT MIN(id) FROM recommendations r2 WHERE r2.parent_id IS NOT NULL"
        " AND r2.created_at = (SELECT MIN(created_at) FROM recommendations r3"
        " WHERE r3.parent_id = r2.parent_id) GROUP BY r2.parent_id)"
    )
    op.drop_index("ix_recommendations_parent", table_name="recommendations")
    op.create_index("ix_recommendations_parent", "recommendations", ["parent_id"], unique=True)


def downgrade() -> None:
    op.drop_index("ix_recommendations_parent", table_name="recommendations")
    op.create_index("ix_recommendations_parent", "recommendations", ["parent_id"])
