"""The browser of the browser tests (marker ``browser``): Debian's chromium, driven by Playwright.

Playwright's own browser download cannot reach its servers from the development and CI machines, so
the tests launch the Debian package's binary. `make system-deps` installs it (it is listed in
deploy/debian-packages.txt); when it is missing, `tests/conftest.py` stops the run before any test
with `MISSING`, one error instead of a failure or skip per browser test.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["CHROMIUM", "FLAGS", "MISSING", "chromium"]

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run")
#: formatted with the number of browser tests (``n``) and the browser's path (``path``)
MISSING = ("{n} browser test(s) (marker `browser`) need Debian's chromium at {path}, which is not installed: "
           "run `make system-deps` (or `apt-get install -y chromium` as root), or leave them out with "
           "`-m 'not browser'`")


@contextmanager
def chromium(extra_args: Sequence[str] = ()) -> Iterator[Any]:
    """A headless chromium (a Playwright ``Browser``), closed afterwards."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=[*FLAGS, *extra_args])
        try:
            yield browser
        finally:
            browser.close()
