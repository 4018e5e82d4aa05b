#!/usr/bin/env bash
# Mutation testing of the cost model and its calibration (mutmut, a dev dependency; not part of CI).
# Usage: tools/mutation.sh [--sample N] [--seed S] [--max-children K]
#   e.g. tools/mutation.sh --sample 400 --seed 1   — a reproducible sample (minutes; all ~3,000 take hours).
# Prints the count per status, the score with its Wilson 95% interval and every mutant not killed;
# mutmut's own log is in mutants/run.log. PYTHON picks the interpreter (default: python).
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-python}" tools/mutation_sample.py "$@"
