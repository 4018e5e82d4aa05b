"""Mutation run over a reproducible random sample of mutmut's mutants (or all of them).

    python tools/mutation_sample.py --sample 300 --seed 1 [--max-children 1]   # what tools/mutation.sh runs
    python tools/mutation_sample.py --target planner --sample 150 --seed 1     # the planner's modules
    python tools/mutation_sample.py                                           # every mutant (hours)

``--target`` picks the configuration: ``perf`` (the default) is ``[tool.mutmut]`` as mutmut reads it; any other
name is the table ``[tool.mutmut.NAME]``, whose keys replace those of ``[tool.mutmut]`` for this run (mutmut
itself reads only ``[tool.mutmut]``, so generation and the ``mutmut run`` child both get the merged table).
Starts from a fresh ``mutants/`` directory, generates every mutant of the target's ``source_paths``,
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
DEFAULT_TARGET = "perf"
# the ``mutmut run`` child: the target's configuration first, then mutmut's own command line
RUN_MUTMUT = ("import sys; sys.path.insert(0, 'tools'); import mutation_sample; "
              "mutation_sample.use_target(sys.argv[1], run=True); from mutmut.__main__ import cli; cli(sys.argv[2:])")


def target_config(table: dict, target: str) -> dict:
    """``[tool.mutmut]`` with the keys of its sub-table ``target`` replacing its own (``perf``: unchanged)."""
    base = {key: value for key, value in table.items() if not isinstance(value, dict)}
    if target == DEFAULT_TARGET:
        return base
    if not isinstance(table.get(target), dict):
        targets = [DEFAULT_TARGET] + [key for key, value in table.items() if isinstance(value, dict)]
        raise SystemExit(f"--target: no [tool.mutmut.{target}] in pyproject.toml; allowed: {', '.join(targets)}")
    return base | table[target]


def use_target(target: str, run: bool = False) -> None:
    """Make mutmut read the target's configuration (before it loads its own); ``run``: also prepare ``mutmut run``
    for code that runs in solver child processes (``forget_solver_children``, ``cover_child_functions``)."""
    import tomllib

    import mutmut.__main__
    import mutmut.configuration

    merged = target_config(tomllib.loads(Path("pyproject.toml").read_text("utf-8"))["tool"]["mutmut"], target)
    mutmut.configuration._config_reader = lambda: lambda key, default: merged.get(key, default)
    mutmut.configuration.reset_config()
    if not run:
        return
    os.register_at_fork(after_in_child=forget_solver_children)
    collect = mutmut.__main__.collect_or_load_stats

    def collect_then_cover(*args, **kwargs) -> None:
        collect(*args, **kwargs)
        cover_child_functions(merged.get("run_in_child", {}))

    mutmut.__main__.collect_or_load_stats = collect_then_cover


def forget_solver_children() -> None:
    """In a forked mutmut worker: drop the idle solver children (planner.solvers.isolated) it inherited. They were
    started before the fork, without this worker's mutant, and its sibling workers hold the same pipes; the
    worker's solves start children of their own, which inherit its ``MUTANT_UNDER_TEST``."""
    isolated = sys.modules.get("planner.solvers.isolated")
    if isolated is not None:
        isolated._POOLS.clear()


def cover_child_functions(run_in_child: dict) -> None:
    """Give the functions that run in a child process the tests of the parent-side function that reaches them.

    mutmut learns which tests reach a function by tracing this process, so code a test runs in a solver child
    (the PuLP backend) looks untested and its mutants would count as "no tests"; the child runs the mutated
    code all the same (it imports ``mutants/`` and inherits ``MUTANT_UNDER_TEST``). ``run_in_child`` is
    ``{"reached_by": mangled name, "prefixes": [mangled-name prefixes]}``."""
    from mutmut.state import state

    if not run_in_child:
        return
    tests = state().tests_by_mangled_function_name
    reaching = set(tests.get(run_in_child["reached_by"], ()))
    for name in {n.partition("__mutmut_")[0] for n in mutant_statuses()}:
        if name.startswith(tuple(run_in_child["prefixes"])):
            tests[name] = set(tests.get(name, ())) | reaching


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
    parser.add_argument("--target", default=DEFAULT_TARGET,
                        help="perf (default: [tool.mutmut]) or NAME of a [tool.mutmut.NAME] table, e.g. planner")
    args = parser.parse_args()
    os.chdir(Path(__file__).resolve().parent.parent)
    use_target(args.target)
    shutil.rmtree("mutants", ignore_errors=True)
    names = generate_mutants()
    picked = names if args.sample is None else sorted(sorted(names, key=lambda name: rank(name, args.seed))[:args.sample])
    print(f"{len(picked)} of {len(names)} mutants" + ("" if args.sample is None else f" (seed {args.seed})"), flush=True)
    command = [sys.executable, "-c", RUN_MUTMUT, args.target, "run", "--max-children", str(args.max_children)]
    with open("mutants/run.log", "w") as log:
        subprocess.run(command + (picked if args.sample is not None else []), stdout=log, stderr=subprocess.STDOUT)
    report(picked, mutant_statuses())
    return 0


if __name__ == "__main__":
    sys.exit(main())
