"""The explorer and docs pages are served from the package: every asset they reference is
local and answers, and their Content Security Policy allows no other origin."""

import re

from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import Settings


def test_pages_and_their_assets_are_local():
    with TestClient(create_app(Settings(database_url="sqlite://"))) as c:
        for path in ("/", "/plans/plan-0123", "/validations/job-0123", "/calibrations/cal-0123",
                     "/docs", "/redoc"):
            r = c.get(path)
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
            csp = r.headers["content-security-policy"]
            assert "default-src 'self'" in csp and "http" not in csp
            refs = re.findall(r'(?:src|href)="([^"]+)"', r.text)
            refs += re.findall(r"(?:url|Url|_url)\s*[:=]\s*['\"]([^'\"]+)['\"]", r.text)
            assert refs, path
            for ref in refs:
                assert not ref.startswith(("http:", "https:", "//")), (path, ref)
                assert c.get(ref).status_code == 200, (path, ref)
        assert "Plan explorer" in c.get("/").text or "plan explorer" in c.get("/").text
        # The pages are not API operations.
        paths = c.get("/openapi.json").json()["paths"]
        assert not any(p in paths for p in ("/", "/plans/{plan_id}", "/docs"))
