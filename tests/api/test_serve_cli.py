"""``siliconmix serve``: its options, and bad input exits 2 with one line (the real start is in test_e2e)."""

from __future__ import annotations

from typer.testing import CliRunner

from planner.cli import app


def test_serve_is_a_command_with_its_options():
    result = CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for option in ("--host", "--port", "--db", "--log-level"):
        assert option in result.output
    assert "127.0.0.1" in result.output and "8000" in result.output


def test_bad_options_and_settings_exit_2():
    runner = CliRunner()
    assert runner.invoke(app, ["serve", "--log-level", "loud"]).exit_code == 2
    assert runner.invoke(app, ["serve", "--port", "70000"]).exit_code == 2
    bad_env = runner.invoke(app, ["serve"], env={"SILICONMIX_PLAN_WORKERS": "0"})
    assert bad_env.exit_code == 2 and "plan_workers" in bad_env.output
