"""Process groups: signalling a job's whole group, telling whether anything of it is left,
and the parent-death signal that makes a job die with the process that started it."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from collections.abc import Callable

# -- dying with the parent --------------------------------------------------------------

_PR_SET_PDEATHSIG = 1


def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                      ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl


PRCTL = _load_prctl()  # resolved here, so the forked child only makes the call
_SIGKILL = int(signal.SIGKILL)  # (an enum member, whose use in a forked child copies pages)


def die_with_parent(parent: int) -> None:
    """In the forked child, before exec: SIGKILL when the parent dies. Must not raise."""
    if PRCTL is None:
        return
    PRCTL(_PR_SET_PDEATHSIG, _SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the call: nobody to outlive
        os._exit(255)


# -- process groups -----------------------------------------------------------------------


def live_members(pgid: int) -> list[int] | None:
    """Processes of group ``pgid`` that are alive (zombies excluded); None without /proc."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    found: list[int] = []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                line = stat.read()
        except OSError:
            continue  # exited meanwhile
        fields = line[line.rfind(b")") + 2:].split(b" ", 4)
        if len(fields) < 4 or fields[0] in (b"Z", b"X"):
            continue
        if int(fields[2]) == pgid:
            found.append(int(name))
    return found


def group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` is alive (zombies excluded). One system call
    in the usual case, an empty group; /proc is read only when something is left."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # a member changed its user (setuid): alive, and not ours to signal
    members = live_members(pgid)
    return members is None or bool(members)


def signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def terminate_group(pgid: int) -> None:
    """SIGTERM, plus SIGCONT so that stopped processes get to handle it (as systemd does)."""
    signal_group(pgid, signal.SIGTERM)
    signal_group(pgid, signal.SIGCONT)


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
