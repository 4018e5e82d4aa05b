"""``python -m planner`` runs the siliconmix command."""

from planner.cli import main

main()
