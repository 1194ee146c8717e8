"""`.ci/env.sh` changes nothing in a shell that sources it but PATH."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ENV_SH = Path(__file__).resolve().parents[1] / ".ci" / "env.sh"
bash = shutil.which("bash")
pytestmark = pytest.mark.skipif(bash is None, reason="needs bash")


def _checkout(tmp_path, python_body: str) -> Path:
    """A fake checkout: .ci/env.sh, pyproject.toml and a .venv whose python runs
    ``python_body``; the install stamp is fresh, so nothing is installed."""
    (tmp_path / ".ci").mkdir()
    shutil.copy(ENV_SH, tmp_path / ".ci" / "env.sh")
    (tmp_path / "pyproject.toml").write_text("")
    bindir = tmp_path / ".venv" / "bin"
    bindir.mkdir(parents=True)
    (bindir / "python").write_text(f"#!/bin/sh\n{python_body}\n")
    (bindir / "python").chmod(0o755)
    stamp = tmp_path / ".venv" / ".clestim-installed"
    stamp.touch()
    os.utime(tmp_path / "pyproject.toml", (1, 1))  # older than the stamp
    return tmp_path


def _bash(script: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([bash, "--norc", "--noprofile", "-c", script], cwd=cwd,
                          capture_output=True, text=True, timeout=30)


def test_sourcing_keeps_the_shell_options(tmp_path):
    root = _checkout(tmp_path, "exit 0")
    out = _bash('before="$-|$(shopt -po pipefail)"; source .ci/env.sh; '
                'after="$-|$(shopt -po pipefail)"; [ "$before" = "$after" ] && echo same; '
                'echo "${PATH%%:*}"; false; echo still-here', root)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["same", str(root / ".venv" / "bin"), "still-here"]


def test_failed_install_returns_1_and_stops_a_set_e_script(tmp_path):
    root = _checkout(tmp_path, "exit 3")
    (root / ".venv" / ".clestim-installed").unlink()  # forces an install: python fails
    interactive = _bash("source .ci/env.sh; echo rc=$?; echo $-", root)
    assert interactive.stdout.split()[0] == "rc=1"
    assert "e" not in interactive.stdout.split()[1]  # no `set -e` leaked
    assert "setting up" in interactive.stderr
    strict = _bash("set -e; source .ci/env.sh; echo not-reached", root)
    assert strict.returncode != 0 and "not-reached" not in strict.stdout
