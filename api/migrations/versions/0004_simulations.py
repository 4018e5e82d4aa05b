"""simulations: every POST /v1/plans/{id}/simulate: the plan, options, run state, result and error

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: Union[str, Sequence[str], None] = "0003"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        "simulations",
        sa.Column("seq", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("plan_id", sa.String(36), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("options_json", sa.Text(), nullable=False),
        sa.Column("result_json", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("seq", name="pk_simulations"),
        sa.UniqueConstraint("id", name="uq_simulations_id"),
    )
    op.create_index("ix_simulations_plan_id", "simulations", ["plan_id"])
    op.create_index("ix_simulations_state", "simulations", ["state"])


def downgrade() -> None:
    op.drop_index("ix_simulations_state", table_name="simulations")
    op.drop_index("ix_simulations_plan_id", table_name="simulations")
    op.drop_table("simulations")
