"""A live service and Debian's Chromium driven by Playwright (Playwright's own browser download
is not reachable here: PLANNER_CHROMIUM names the binary, /usr/bin/chromium by default;
``make test`` installs it when missing)."""

import os

import pytest

from api.live import live_server

CHROMIUM = os.environ.get("PLANNER_CHROMIUM", "/usr/bin/chromium")


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    path = tmp_path_factory.mktemp("explorer") / "planner.db"
    with live_server(f"sqlite:///{path}", log=path.parent / "server.log") as srv:
        yield srv


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail(f"no browser at {CHROMIUM}: install Debian's chromium (`make test` does) "
                    f"or point PLANNER_CHROMIUM at one")

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser, service):
    """A fresh tab; every request it makes outside the service fails the test (the page and
    the docs must work with no internet)."""
    context = browser.new_context(base_url=service.url, viewport={"width": 1280, "height": 900})
    outside: list[str] = []

    def guard(route):
        url = route.request.url
        if url.startswith(service.url) or url.startswith("data:") or url.startswith("blob:"):
            route.continue_()
        else:
            outside.append(url)
            route.abort()

    context.route("**/*", guard)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    yield tab
    context.close()
    assert outside == [], f"the page fetched from outside the service: {outside}"
    assert errors == [], f"script errors: {errors}"
