#!/usr/bin/env bash
# Mutation testing of the cost model and its calibration (mutmut, a dev dependency; not part of CI).
# Usage: tools/mutation.sh [max_children]   — prints the killed/survived counts and the score.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf mutants
python -m mutmut run --max-children "${1:-2}" >/dev/null 2>&1 || true
python -m mutmut results > mutants/results.txt 2>&1 || true
python - <<'PY'
import collections, pathlib, re
lines = pathlib.Path("mutants/results.txt").read_text().splitlines()
status = collections.Counter(line.rsplit(":", 1)[-1].strip() for line in lines if ":" in line)
print(dict(status))
PY
python -m mutmut export-cicd-stats >/dev/null 2>&1 && cat mutants/mutmut-cicd-stats.json || true
