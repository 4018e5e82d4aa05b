"""Mutation run over a reproducible random sample of mutmut's mutants (or all of them).

    python tools/mutation_sample.py --sample 300 --seed 1 [--max-children 1]   # what tools/mutation.sh runs
    python tools/mutation_sample.py                                           # every mutant (hours)

Starts from a fresh ``mutants/`` directory, generates every mutant of ``[tool.mutmut] source_paths``,
ranks them by ``sha256(f"{seed}:{name}")`` and takes the first ``--sample`` (a uniform random sample:
same code + same seed = same sample whatever the tests, and a code change swaps only the mutants it
adds or removes), runs only those with ``mutmut run NAME...`` and prints the count per status,
the score ``(killed + timeout) / decided`` with its Wilson 95% interval, and every mutant that was not
killed. ``decided`` counts survivors and "no tests" mutants against the score; only mutants mutmut did not
check (an interrupted run) are left out. Uses mutmut 3's generation functions (``mutmut.__main__``), since
its CLI has no generate-only command. mutmut's own output goes to ``mutants/run.log``. Not part of CI.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import math
import os
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

KILLED = ("killed", "timeout", "caught by type check")


def generate_mutants() -> list[str]:
    """Write every mutant under ``mutants/`` and return all mutant names, sorted."""
    from mutmut.__main__ import (copy_also_copy_files, copy_src_dir, create_mutants, set_mutant_under_test,
                                 setup_source_paths)

    set_mutant_under_test("mutant_generation")
    Path("mutants").mkdir()
    with open("mutants/generate.log", "w") as log, contextlib.redirect_stdout(log):
        copy_src_dir()
        copy_also_copy_files()
        setup_source_paths()
        create_mutants(1)
    return sorted(mutant_statuses())


def rank(name: str, seed: int) -> str:
    """A mutant's place in the seed's random order."""
    return hashlib.sha256(f"{seed}:{name}".encode()).hexdigest()


def mutant_statuses() -> dict[str, str]:
    """Mutant name -> mutmut's status word, read from ``mutants/`` meta files."""
    from mutmut.mutation.data import SourceFileMutationData
    from mutmut.stats import status_by_exit_code
    from mutmut.utils.file_utils import walk_mutatable_files

    statuses = {}
    for path in walk_mutatable_files():
        data = SourceFileMutationData(path=path)
        data.load()
        statuses.update({name: status_by_exit_code[code] for name, code in data.exit_code_by_key.items()})
    return statuses


def wilson_interval(killed: int, total: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion: (p + z²/2n ± z·√(p(1-p)/n + z²/4n²)) / (1 + z²/n)."""
    if total == 0:
        return 0.0, 1.0
    p = killed / total
    centre = p + z * z / (2 * total)
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total))
    denominator = 1 + z * z / total
    return (centre - half) / denominator, (centre + half) / denominator


def report(names: list[str], statuses: dict[str, str]) -> None:
    """Print counts per status, the score with its interval, and the mutants that were not killed."""
    counts = collections.Counter(statuses[name] for name in names)
    decided = sum(n for status, n in counts.items() if status != "not checked")
    killed = sum(counts[status] for status in KILLED)
    low, high = wilson_interval(killed, decided)
    print("counts:", ", ".join(f"{status}={n}" for status, n in sorted(counts.items())))
    print(f"score: {killed}/{decided} = {killed / max(decided, 1):.1%} (Wilson 95%: {low:.1%}-{high:.1%})")
    for name in names:
        if statuses[name] not in KILLED:
            print(f"  {statuses[name]}: {name}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, help="number of mutants to run (default: all)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the sample (default 1)")
    parser.add_argument("--max-children", type=int, default=1, help="parallel mutmut workers (default 1)")
    args = parser.parse_args()
    os.chdir(Path(__file__).resolve().parent.parent)
    shutil.rmtree("mutants", ignore_errors=True)
    names = generate_mutants()
    picked = names if args.sample is None else sorted(sorted(names, key=lambda name: rank(name, args.seed))[:args.sample])
    print(f"{len(picked)} of {len(names)} mutants" + ("" if args.sample is None else f" (seed {args.seed})"), flush=True)
    command = [sys.executable, "-m", "mutmut", "run", "--max-children", str(args.max_children)]
    with open("mutants/run.log", "w") as log:
        subprocess.run(command + (picked if args.sample is not None else []), stdout=log, stderr=subprocess.STDOUT)
    report(picked, mutant_statuses())
    return 0


if __name__ == "__main__":
    sys.exit(main())
