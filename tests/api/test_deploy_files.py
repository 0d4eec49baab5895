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


def _settings_vars() -> set[str]:
    return {f"PLANNER_{name.upper()}" for name in Settings.model_fields}


def test_compose_runs_workers_apart_from_the_api():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    api, worker = compose["services"]["api"], compose["services"]["worker"]
    assert api["environment"]["PLANNER_RUN_JOBS"] == "false"
    assert worker["command"][:2] == ["planner", "worker"]
    assert worker["depends_on"]["db"]["condition"] == "service_healthy"
    assert worker["environment"]["PLANNER_DATABASE_URL"] == api["environment"][
        "PLANNER_DATABASE_URL"]
    assert set(worker["environment"]) <= _settings_vars()
    port = worker["command"][worker["command"].index("--port") + 1]
    assert f"127.0.0.1:{port}/readyz" in " ".join(worker["healthcheck"]["test"])
    assert "--scale api=3 --scale worker=2" in (ROOT / "docker-compose.yml").read_text()


def test_kubernetes_manifests_wire_api_workers_probes_and_the_token_secret(tmp_path):
    from fastapi.testclient import TestClient

    from api.cli import app as cli
    from api.main import create_app, create_worker_app

    docs = list(yaml.safe_load_all((ROOT / "deploy/k8s/planner.yaml").read_text()))
    by = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    secret = by[("Secret", "planner")]
    assert {"PLANNER_API_TOKEN", "PLANNER_DATABASE_URL"} <= set(secret["stringData"])
    assert set(secret["stringData"]) <= _settings_vars()
    commands = {c.name for c in cli.registered_commands}
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'k8s.db'}")
    apps = {"serve": create_app(settings), "worker": create_worker_app(settings)}
    for name, role in (("planner-api", "serve"), ("planner-worker", "worker")):
        dep = by[("Deployment", name)]
        assert dep["spec"]["selector"]["matchLabels"] == dep["spec"]["template"]["metadata"][
            "labels"]
        (container,) = dep["spec"]["template"]["spec"]["containers"]
        args = container["args"]
        assert args[:2] == ["planner", role] and role in commands
        port = int(args[args.index("--port") + 1])
        assert container["ports"][0]["containerPort"] == port
        with TestClient(apps[role]) as client:      # the probes' paths answer on that role
            for probe in ("livenessProbe", "readinessProbe"):
                get = container[probe]["httpGet"]
                assert get["port"] == container["ports"][0]["name"]
                assert client.get(get["path"]).status_code == 200
        assert {e["name"] for e in container["env"]} <= _settings_vars()
        assert container["envFrom"] == [{"secretRef": {"name": "planner"}}]
    api_env = {e["name"]: e["value"] for e in by[("Deployment", "planner-api")]["spec"][
        "template"]["spec"]["containers"][0]["env"]}
    assert api_env["PLANNER_RUN_JOBS"] == "false"
    service = by[("Service", "planner-api")]
    assert service["spec"]["selector"] == by[("Deployment", "planner-api")]["spec"][
        "selector"]["matchLabels"]
    assert service["spec"]["ports"][0]["targetPort"] == "http"
