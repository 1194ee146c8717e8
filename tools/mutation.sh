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
# killed / total per target, from mutmut's per-file results (mutants/**/*.meta:
# exit code 1 killed, 0 survived, 33 no test reaches the mutant, -24/36/152 timeout,
# null not run yet)
python - <<'PY'
import collections, glob, json
names = {1: "killed", 0: "survived", 33: "no tests", -24: "timeout", 36: "timeout",
         152: "timeout", None: "not run"}
counts = collections.defaultdict(collections.Counter)
for meta in glob.glob("mutants/clestim/**/*.meta", recursive=True):
    path = meta[len("mutants/"):-len(".meta")]
    target = "clestim/methods/" if "/methods/" in path else path
    for code in json.load(open(meta))["exit_code_by_key"].values():
        counts[target][names.get(code, f"exit {code}")] += 1
for target, c in sorted(counts.items()):
    total = sum(c.values())
    print(f"{target}: killed {c['killed']} / {total} ({100 * c['killed'] / total:.0f}%); "
          + ", ".join(f"{k} {v}" for k, v in sorted(c.items()) if k != "killed"))
PY
