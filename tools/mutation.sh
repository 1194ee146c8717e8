#!/usr/bin/env bash
# Mutation testing of clestim's methods, memory policies and losses with mutmut.
#
#   tools/mutation.sh                         # all three targets
#   tools/mutation.sh "clestim.memory*"       # one target (mutmut's mutant-name globs)
#   tools/mutation.sh "clestim.losses*" "clestim.methods.lwf*"
#
# The targets and the fast test selection each mutant runs are in pyproject.toml
# ([tool.mutmut]). mutmut copies the package and the tests to mutants/ (ignored by
# git) and keeps its results there, so a second call resumes. It is slow (minutes
# to hours, CPU-bound) and runs outside the default test command, niced.
# Environment: MUTMUT_JOBS (parallel mutants, default 1), MUTMUT_NICE (default 15).
# Needs the dev extra: pip install -e ".[dev]".
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1
export CLESTIM_SHARED_DATA="${CLESTIM_SHARED_DATA:-$PWD/../shared/data}"
unset PYTHONPATH  # the mutated copy in mutants/ must be the one imported
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=("clestim.memory*" "clestim.losses*" "clestim.methods*")
fi
nice -n "${MUTMUT_NICE:-15}" mutmut run --max-children "${MUTMUT_JOBS:-1}" "${targets[@]}"
# killed / total per target
mutmut results --all true 2>/dev/null | python - "${targets[@]}" <<'PY'
import collections, fnmatch, sys
counts = collections.defaultdict(collections.Counter)
for line in sys.stdin:
    name, _, status = line.strip().rpartition(": ")
    if not name:
        continue
    target = next((t for t in sys.argv[1:] if fnmatch.fnmatch(name, t)), None)
    if target:
        counts[target][status] += 1
for target, c in counts.items():
    total = sum(c.values())
    print(f"{target}: killed {c['killed']} / {total} ({100 * c['killed'] / total:.0f}%); "
          + ", ".join(f"{k} {v}" for k, v in sorted(c.items()) if k != "killed"))
PY
