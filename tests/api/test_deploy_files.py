"""docker-compose.yml and the Dockerfile: what can be checked without a Docker engine."""

from pathlib import Path

import yaml

from api.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def test_compose_file_wires_the_api_to_postgres():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    api, db = compose["services"]["api"], compose["services"]["db"]
    dockerfile = ROOT / api["build"]["context"] / api["build"]["dockerfile"]
    assert dockerfile.is_file()
    assert api["depends_on"]["db"]["condition"] == "service_healthy"
    assert "healthcheck" in api and "healthcheck" in db
    env = api["environment"]
    # Every PLANNER_ variable is a setting the service reads.
    fields = {f"PLANNER_{name.upper()}" for name in Settings.model_fields}
    assert set(env) <= fields, set(env) - fields
    url = env["PLANNER_DATABASE_URL"]
    user, password, name = (db["environment"][k] for k in
                            ("POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB"))
    assert url == f"postgresql+psycopg://{user}:{password}@db:5432/{name}"
    assert api["ports"] == ["8000:8000"]


def test_dockerfile_runs_the_service_it_builds():
    text = (ROOT / "Dockerfile").read_text()
    assert "COPY planner ./planner" in text and "COPY api ./api" in text
    assert 'CMD ["planner", "serve", "--host", "0.0.0.0", "--port", "8000"]' in text
    assert "/healthz" in text and "EXPOSE 8000" in text
    assert "PLANNER_DATABASE_URL=" in text
