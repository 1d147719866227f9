"""Two versions of cronjobs to measure side by side (compare.py): the code at a git ref
("before") and this checkout's working tree ("after"), each installed with
``pip install -e '.[embedded]'`` into a virtual environment of its own, made in a temporary
directory for the run and removed after it. Both sides get a fresh environment, so that
they differ in the code alone (and in what each one's pyproject.toml pulls in).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import benchlib
from benchlib import log
from common import checked


@dataclass(frozen=True)
class Version:
    """One installed cronjobs: how the figures name it, what it was installed from, the
    interpreter of its virtual environment."""

    name: str
    source: str
    python: str

    @property
    def cli(self) -> list[str]:
        """Its ``cronjobs`` command."""
        return benchlib.cronjobs_command(self.python)

    def describe(self) -> dict[str, str]:
        """For the report: the source and what ``cronjobs --version`` says."""
        version = checked(benchlib.run([*self.cli, "--version"], benchlib.clean_env()),
                          f"cronjobs --version ({self.name})").stdout.strip()
        return {"source": self.source, "cronjobs --version": version}


@contextlib.contextmanager
def before_and_after(ref: str) -> Iterator[tuple[Version, Version]]:
    """The code at ``ref`` and the working tree, installed; removed on exit."""
    tmp = Path(tempfile.mkdtemp(prefix="cjbench-versions-"))
    try:
        commit = git("rev-parse", "--verify", f"{ref}^{{commit}}")
        source = tmp / "before-src"
        export(commit, source)
        before = install("before", f"{ref} ({commit[:10]})", source, tmp / "before-venv")
        head = git("rev-parse", "--short", "HEAD")
        changed = git("status", "--porcelain", "--", "cronjobs", "pyproject.toml")
        after = install("after", f"the working tree at {head}"
                        + (" (with uncommitted changes)" if changed else ""),
                        benchlib.ROOT, tmp / "after-venv")
        yield before, after
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def git(*args: str) -> str:
    """``git ARGS`` in this checkout; its output, stripped."""
    result = benchlib.run(["git", "-C", str(benchlib.ROOT), *args], os.environ)
    return checked(result, f"git {args[0]}").stdout.strip()


def export(commit: str, dest: Path) -> None:
    """The files of ``commit`` (``git archive``) in ``dest``: no worktree to clean up."""
    dest.mkdir(parents=True)
    archive = dest.with_suffix(".tar")
    git("archive", "--format=tar", "-o", str(archive), commit)
    checked(benchlib.run(["tar", "-xf", str(archive), "-C", str(dest)], os.environ), "tar")
    archive.unlink()


def install(name: str, source: str, project: Path, venv: Path,
            extras: str = "embedded") -> Version:
    """A new virtual environment with ``project`` installed (editable, with ``extras``), its
    bytecode compiled into the run's cache like this environment's."""
    log(f"  {name}: installing {source} into a new virtual environment")
    env = benchlib.clean_env()
    checked(benchlib.run([sys.executable, "-m", "venv", str(venv)], env), "python -m venv")
    python = str(venv / "bin" / "python")
    checked(benchlib.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                          "-e", f"{project}[{extras}]"], env, timeout=1200),
            f"pip install ({name})")
    benchlib.warm_up(python)
    return Version(name, source, python)
