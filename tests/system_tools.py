"""Tests that need something pip cannot install: a system tool, or root.

Such a test runs wherever what it needs is there. Elsewhere it is skipped, with a reason that
says how to get it (the Debian package to install), so that the README's test command passes
on a fresh machine. With ``CRONJOBS_REQUIRE_SYSTEM_TOOLS=1`` (CI sets it, after installing
the packages with ``.ci/install-system-packages``) the same test fails instead: a missing tool
must not turn into a green run that tested nothing.

Every such test asks here, through :func:`require_tool` and :func:`require_root`.
"""

from __future__ import annotations

import os
import shutil
from typing import NoReturn

import pytest

REQUIRE = "CRONJOBS_REQUIRE_SYSTEM_TOOLS"
# Looked in as well as $PATH: a non-login shell's PATH often lacks the sbin directories.
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def required() -> bool:
    """Whether a missing tool fails the test instead of skipping it."""
    return os.environ.get(REQUIRE, "") not in ("", "0")


def require_tool(name: str, package: str) -> str:
    """The path of the executable ``name``, from the Debian package ``package``; skips
    (fails under ``CRONJOBS_REQUIRE_SYSTEM_TOOLS=1``) the calling test when it is missing."""
    path = os.pathsep.join(p for p in (os.environ.get("PATH", ""), SYSTEM_PATH) if p)
    found = shutil.which(name, path=path)
    if found is None:
        unavailable(f"needs `{name}` from the Debian package {package} "
                    f"(apt-get install {package})")
    return found


def require_root(why: str) -> None:
    """Skips (fails under ``CRONJOBS_REQUIRE_SYSTEM_TOOLS=1``) the calling test unless it
    runs as root; ``why`` says what it does as root."""
    if os.geteuid() != 0:
        unavailable(f"needs root: {why}")


def unavailable(reason: str) -> NoReturn:
    """Skip the calling test for ``reason``, or fail it when skips are not allowed."""
    if required():
        pytest.fail(f"{reason}; {REQUIRE} is set, so this is a failure, not a skip",
                    pytrace=False)
    pytest.skip(reason)
