"""Regenerate docs/dashboard.png and docs/dashboard-phone.png.

The pictures are taken by the browser test that checks them (tests/browser/test_dashboard.py,
``test_the_docs_screenshots``, with the jobs of tests/browser/showcase.py): one source for
what the docs show and what the tests assert. This runs that test with
CRONJOBS_SCREENSHOTS=1, against the test database server the suite uses.

    pip install -e '.[embedded,test]'   # playwright; the browser is Debian's chromium
    CRONJOBS_TEST_DATABASE_URL=postgresql://postgres@localhost:5432/postgres \\
        python docs/screenshot.py
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    test = "tests/browser/test_dashboard.py::test_the_docs_screenshots"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", test],
        cwd=ROOT, env={**os.environ, "CRONJOBS_SCREENSHOTS": "1"}, check=False)
    raise SystemExit(done.returncode)


if __name__ == "__main__":
    main()
