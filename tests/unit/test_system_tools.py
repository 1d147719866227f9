"""The one helper that skips a test needing a system tool or root, or fails it in CI."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from system_tools import REQUIRE, require_root, require_tool

MISSING = "cronjobs-test-no-such-tool"


def test_a_present_tool_is_found_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                         ) -> None:
    tool = tmp_path / MISSING
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv(REQUIRE, "1")
    assert require_tool(MISSING, "some-package") == str(tool)


def test_the_system_directories_are_searched_beyond_path(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    monkeypatch.setenv("PATH", "")
    assert require_tool("sh", "dash") in ("/usr/bin/sh", "/bin/sh")


@pytest.mark.parametrize("value", [None, "", "0"])
def test_a_missing_tool_skips_naming_the_debian_package(
        value: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    if value is None:
        monkeypatch.delenv(REQUIRE, raising=False)
    else:
        monkeypatch.setenv(REQUIRE, value)
    with pytest.raises(pytest.skip.Exception) as skipped:
        require_tool(MISSING, "some-package")
    assert str(skipped.value) == (f"needs `{MISSING}` from the Debian package some-package "
                                  "(apt-get install some-package)")


def test_a_missing_tool_fails_when_system_tools_are_required(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REQUIRE, "1")
    with pytest.raises(pytest.fail.Exception) as failed:
        require_tool(MISSING, "some-package")
    assert str(failed.value) == (
        f"needs `{MISSING}` from the Debian package some-package "
        "(apt-get install some-package); CRONJOBS_REQUIRE_SYSTEM_TOOLS is set, so this is a "
        "failure, not a skip")


def test_root_is_required_like_a_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REQUIRE, raising=False)
    if os.geteuid() == 0:
        require_root("it starts the cron daemon")  # nothing happens
        monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(pytest.skip.Exception) as skipped:
        require_root("it starts the cron daemon")
    assert str(skipped.value) == "needs root: it starts the cron daemon"
    monkeypatch.setenv(REQUIRE, "1")
    with pytest.raises(pytest.fail.Exception) as failed:
        require_root("it starts the cron daemon")
    assert str(failed.value) == ("needs root: it starts the cron daemon; "
                                 "CRONJOBS_REQUIRE_SYSTEM_TOOLS is set, so this is a failure, "
                                 "not a skip")
