"""CLI commands kept in their own modules; each registers on ``planner.cli.app`` when imported."""
