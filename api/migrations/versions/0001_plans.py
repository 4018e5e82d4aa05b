"""plans: every answered POST /v1/plans with its request and the plan JSON as answered

Revision ID: 0001
Revises:
Create Date: 2026-12-01
"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: Union[str, Sequence[str], None] = None
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        "plans",
        sa.Column("seq", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("model", sa.String(64), nullable=False),
        sa.Column("objective", sa.String(16), nullable=False),
        sa.Column("solver", sa.String(16), nullable=False),
        sa.Column("engine", sa.String(16), nullable=False),
        sa.Column("time_limit_s", sa.Float(), nullable=False),
        sa.Column("solve_time_s", sa.Float(), nullable=False),
        sa.Column("goodput_scale", sa.Float(), nullable=False),
        sa.Column("devices", sa.Integer(), nullable=False),
        sa.Column("power_kw", sa.Float(), nullable=False),
        sa.Column("request_json", sa.Text(), nullable=False),
        sa.Column("plan_json", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("seq", name="pk_plans"),
        sa.UniqueConstraint("id", name="uq_plans_id"),
    )
    op.create_index("ix_plans_created_at", "plans", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_plans_created_at", table_name="plans")
    op.drop_table("plans")
