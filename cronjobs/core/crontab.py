"""The crontab lines that drive cronjobs on this host, written with absolute paths.

cron starts a command with a minimal environment: ``PATH=/usr/bin:/bin``, the user's home
as the directory, none of the shell's variables. A virtualenv's ``cronjobs`` is not on that
``PATH``, so ``* * * * * cronjobs tick`` finds nothing. These lines name the executable by its
absolute path and set, as crontab variables, what the current command was given through its
environment (where the embedded server lives, the handler modules, the database), so that
cron's tick does what a tick typed here would. A password is never written: a URL that holds
one is written masked and commented out, to be completed by hand (or the password kept in
``~/.pgpass``).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cronjobs.db.config import DatabaseTarget
from cronjobs.db.embedded import home as embedded_home

# What the lines do after the time fields; the same as crontab.example's.
TICK = "tick 2>&1 | logger -t cronjobs"
CHECK = "status --check 2>&1 >/dev/null | logger -s -t cronjobs -p user.err"


@dataclass(frozen=True)
class Crontab:
    """The lines for one host: comments, the variables to set, then the schedule lines."""

    executable: str
    variables: tuple[tuple[str, str], ...]
    notes: tuple[str, ...]
    lines: tuple[str, ...]

    def text(self) -> str:
        out = ["# cronjobs: paste into `crontab -e`. cron's PATH does not include the",
               "# directory cronjobs is installed in, so the lines name it in full."]
        out += [f"# {note}" for note in self.notes]
        out += [f"{name}={value}" for name, value in self.variables]
        out += self.lines
        return "\n".join(out)


def find_executable() -> str:
    """The absolute path of the ``cronjobs`` this interpreter runs: the script beside the
    interpreter (a virtualenv's ``bin``; not resolved, so the virtualenv's own path is kept),
    else the one on ``PATH``."""
    beside = Path(sys.executable).absolute().parent / "cronjobs"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("cronjobs")
    if found:
        return str(Path(found).absolute())
    return str(beside)


def crontab(executable: str, target: DatabaseTarget, environ: Mapping[str, str], *,
            apps: tuple[str, ...], workdir: str) -> Crontab:
    """The lines for a tick every minute and the monitoring line every five minutes, for
    the database ``target`` that this command resolved from ``environ`` and its options.

    The embedded default: ``CRONJOBS_HOME`` (cron's environment would compute its own). A
    URL: ``CRONJOBS_DATABASE_URL``, or, when it holds a password, the URL masked in a
    comment to complete by hand. libpq's ``PG*`` variables: those set, but ``PGPASSWORD``.
    ``apps``: the handler modules, imported from ``workdir`` (cron starts in the home
    directory, so the tick line changes to it first)."""
    command = shlex.quote(executable)
    variables: list[tuple[str, str]] = []
    notes: list[str] = []
    if target.conninfo is None:
        variables.append(("CRONJOBS_HOME", str(embedded_home())))
    elif target.conninfo == "":
        variables += [(name, environ[name]) for name in sorted(environ)
                      if name.startswith("PG") and name != "PGPASSWORD" and environ[name]]
        if environ.get("PGPASSWORD"):
            notes.append("PGPASSWORD is not written here: keep the password in ~/.pgpass.")
    elif target.display != target.conninfo:
        notes += ["The database URL holds a password, written masked: put it in place of ***",
                  "(or keep it in ~/.pgpass and leave it out), then uncomment the line.",
                  f"CRONJOBS_DATABASE_URL={target.display}"]
    else:
        variables.append(("CRONJOBS_DATABASE_URL", target.conninfo))
    prefix = ""
    if apps:
        variables.append(("CRONJOBS_APP", ",".join(apps)))
        prefix = f"cd {shlex.quote(workdir)} && "
    lines = (f"* * * * * {prefix}{command} {TICK}",
             f"*/5 * * * * {command} {CHECK}")
    return Crontab(executable=executable, variables=tuple(variables), notes=tuple(notes),
                   lines=lines)
