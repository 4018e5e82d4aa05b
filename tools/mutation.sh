#!/usr/bin/env bash
# Mutation testing (mutmut, a dev dependency; not part of CI): the cost model and its calibration ([tool.mutmut]),
# or with --target planner the MILP, solver wrappers, strategies, verify, plan, optimize, decompose ([tool.mutmut.planner]).
# Usage: tools/mutation.sh [--target perf|planner] [--sample N] [--seed S] [--max-children K]
#   e.g. tools/mutation.sh --sample 400 --seed 1   — a reproducible sample (minutes; all ~3,000 take hours).
#        tools/mutation.sh --target planner --sample 150 --seed 1 --max-children 2   — ~20 min on 2 busy cores (of ~8,000).
# Prints the count per status, the score with its Wilson 95% interval and every mutant not killed;
# mutmut's own log is in mutants/run.log. PYTHON picks the interpreter (default: python).
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-python}" tools/mutation_sample.py "$@"
