"""Screenshots of the plan explorer for the README (docs/img/*.png): a live service on a
throw-away SQLite database, Debian's Chromium through Playwright.

    python docs/screenshots.py
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from api.live import live_server  # noqa: E402

OUT = ROOT / "docs" / "img"
REQUEST = {"model": {"preset": "llama3-70b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 8},
           "training": {"global_batch_size": 512, "seq_length": 8192},
           "search": {"top_k": 5, "space_sample": 400}}


def main() -> int:
    from playwright.sync_api import sync_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, \
            live_server(f"sqlite:///{tmp}/planner.db") as srv, sync_playwright() as p:
        plan_id = httpx.post(srv.url + "/v1/plans", json=REQUEST, timeout=120).json()["id"]
        browser = p.chromium.launch(executable_path=os.environ.get("PLANNER_CHROMIUM",
                                                                    "/usr/bin/chromium"),
                                    args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.goto(f"{srv.url}/plans/{plan_id}")
        page.wait_for_selector("#timeline rect.span")
        page.locator("#result").screenshot(path=str(OUT / "explorer-compare.png"))
        page.locator("#detail").screenshot(path=str(OUT / "explorer-plan.png"))
        page.locator("#space-chart").screenshot(path=str(OUT / "explorer-space.png"))
        page.goto(srv.url + "/")
        page.wait_for_selector("body[data-ready=true]")
        page.fill("#global_batch_size", "-3")
        page.click("#plan-button")
        page.wait_for_selector(".field-error")
        page.locator("#ask").screenshot(path=str(OUT / "explorer-ask-error.png"))
        browser.close()
    print("\n".join(str(f.relative_to(ROOT)) for f in sorted(OUT.glob("*.png"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
