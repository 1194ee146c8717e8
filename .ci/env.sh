#!/usr/bin/env bash
# Creates the project's virtual environment in .venv when it is missing and
# (re)installs clestim into it when pyproject.toml is newer than the last install.
# torch==2.13.0 is installed first and explicitly: on the project machines that
# release is a CPU build on local disk, while a bare "torch" may pull a CUDA build.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv="$root/.venv"
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
export PATH="$venv/bin:$PATH"
