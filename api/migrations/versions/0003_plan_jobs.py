"""plan_jobs: every POST /v1/plans answered 202: its request, run state, progress and error

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-15
"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: Union[str, Sequence[str], None] = "0002"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        "plan_jobs",
        sa.Column("seq", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("stage", sa.String(16), nullable=True),
        sa.Column("progress_json", sa.Text(), nullable=True),
        sa.Column("solver", sa.String(16), nullable=False),
        sa.Column("time_limit_s", sa.Float(), nullable=False),
        sa.Column("request_json", sa.Text(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("seq", name="pk_plan_jobs"),
        sa.UniqueConstraint("id", name="uq_plan_jobs_id"),
    )
    op.create_index("ix_plan_jobs_state", "plan_jobs", ["state"])


def downgrade() -> None:
    op.drop_index("ix_plan_jobs_state", table_name="plan_jobs")
    op.drop_table("plan_jobs")
