#!/usr/bin/env bash
# Creates the project's virtual environment in .venv when it is missing and
# (re)installs clestim into it when pyproject.toml is newer than the last install,
# then puts .venv/bin first on PATH.
# torch==2.13.0 is installed first and explicitly: on the project machines that
# release is a CPU build on local disk, while a bare "torch" may pull a CUDA build.
#
# Meant to be sourced (by .ci/run and .ci/bench). The install runs in a subshell
# with `set -euo pipefail`, so a sourcing shell keeps its own options: the only
# change it sees is PATH. A failed install makes `source .ci/env.sh` return 1
# (which stops .ci/run and .ci/bench, as they run under `set -e`). To work in the
# environment interactively, prefer `source .venv/bin/activate`.
_clestim_venv="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.venv"
(
  set -euo pipefail
  venv="$_clestim_venv"
  root=$(dirname "$venv")
  if [ ! -x "$venv/bin/python" ]; then
    echo "clestim: creating $venv" >&2
    python3 -m venv "$venv"
  fi
  stamp="$venv/.clestim-installed"
  if [ ! -f "$stamp" ] || [ "$root/pyproject.toml" -nt "$stamp" ]; then
    echo "clestim: installing dependencies into $venv" >&2
    "$venv/bin/python" -m pip install -q --upgrade pip
    "$venv/bin/python" -m pip install -q "torch==2.13.0"
    "$venv/bin/python" -m pip install -q -e "$root[test,dask]"
    touch "$stamp"
  fi
)
# not `if ! ( ... )`: bash ignores `set -e` inside a subshell whose status is tested
if [ $? -ne 0 ]; then
  echo "clestim: setting up $_clestim_venv failed" >&2
  unset _clestim_venv
  return 1 2>/dev/null || exit 1
fi
export PATH="$_clestim_venv/bin:$PATH"
unset _clestim_venv
