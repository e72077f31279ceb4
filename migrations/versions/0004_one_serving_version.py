"""At most one serving model version per kind.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("uq_model_versions_one_serving", "model_versions", ["kind"], unique=True,
                    postgresql_where=sa.text("serving"), sqlite_where=sa.text("serving"))


def downgrade() -> None:
    op.drop_index("uq_model_versions_one_serving", table_name="model_versions")
