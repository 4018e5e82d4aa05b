"""studies: every POST /v1/studies with its spec, status, progress and output folder

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-08
"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: Union[str, Sequence[str], None] = "0001"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        "studies",
        sa.Column("seq", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("done", sa.Integer(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("spec_json", sa.Text(), nullable=False),
        sa.Column("output_dir", sa.Text(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("seq", name="pk_studies"),
        sa.UniqueConstraint("id", name="uq_studies_id"),
    )
    op.create_index("ix_studies_created_at", "studies", ["created_at"])
    op.create_index("ix_studies_status", "studies", ["status"])


def downgrade() -> None:
    op.drop_index("ix_studies_status", table_name="studies")
    op.drop_index("ix_studies_created_at", table_name="studies")
    op.drop_table("studies")
