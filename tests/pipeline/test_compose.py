"""docker-compose.yml and the Dockerfiles, checked against the project without an engine.

(tests/docker builds and runs them for real; these checks are fast and catch drift early.)

Every command must parse with the real CLI, every copied path and bind mount must exist,
every TIMERSTORE_ variable must be a setting, every port, host and health-check path must
match what the service and the Spark cluster listen on, and the Spark image must be the
version of the installed PySpark.
"""

from __future__ import annotations

import re
import shlex
import zipfile
from pathlib import Path
from typing import Any

import pyspark
import pytest
import yaml

from app.config import load_settings
from timerstore.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
PORTS = yaml.safe_load((ROOT / "docker-compose.override.yml").read_text())["services"]
OFFLINE = yaml.safe_load((ROOT / "docker-compose.offline.yml").read_text())["services"]
TEST = yaml.safe_load((ROOT / "docker-compose.test.yml").read_text())["services"]
BUILD_SCRIPT = (ROOT / "docker/build-offline.sh").read_text()
WHEELHOUSE = "docker/wheelhouse"  # made by docker/build-offline.sh, ignored by git
LOCK_PINS = dict(
    line.split("==") for line in (ROOT / "requirements.lock").read_text().split() if "==" in line
)
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
# the cluster profile's services (tests/cluster/test_compose_cluster.py checks them)
CLUSTER = {n for n, s in SERVICES.items() if "cluster" in s.get("profiles", ())}
PY_PINS = dict(re.findall(r'"([A-Za-z0-9_.-]+)==([^"]+)"', (ROOT / "pyproject.toml").read_text()))


def interpolate(value: str) -> str:
    """Compose's ``${VAR:-default}`` with the variable unset."""
    return re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", value)


def dockerfile(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", path.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def exec_form(args: str) -> list[str]:
    return list(yaml.safe_load(args))  # a JSON array is YAML


def cli_args(command: list[str]) -> Any:
    assert command[0] == "timerstore", command
    return build_parser().parse_args([interpolate(c) for c in command[1:]])


def mounts(service: dict[str, Any]) -> dict[str, str]:
    """Container path -> source (named volume or bind path)."""
    out = {}
    for item in service.get("volumes", []):
        source, target, *_ = item.split(":")
        out[target] = source
    return out


def mounted(service: dict[str, Any], path: str) -> bool:
    return any(path == t or path.startswith(t.rstrip("/") + "/") for t in mounts(service))


SPARK_IMAGE = SERVICES["spark-master"]["image"]


def test_the_spark_image_is_official_and_matches_the_installed_pyspark():
    name, tag = SPARK_IMAGE.split(":")
    assert name == "apache/spark"
    assert tag.split("-")[0] == pyspark.__version__
    assert "python3" in tag and "java17" in tag
    args = dict(
        re.findall(r"ARG (\w+)=(\S+)", (ROOT / "docker/spark-worker.Dockerfile").read_text())
    )
    assert args["SPARK_IMAGE"] == SPARK_IMAGE


def test_spark_processes_are_classes_of_that_spark_version():
    jars = Path(pyspark.__file__).parent / "jars"
    [core] = jars.glob(f"spark-core_*-{pyspark.__version__}.jar")
    names = set(zipfile.ZipFile(core).namelist())
    for service in ("spark-master", "spark-worker"):
        command = SERVICES[service]["command"]
        assert command[0] == "/opt/spark/bin/spark-class"
        assert command[1].replace(".", "/") + ".class" in names, command[1]
    master = SERVICES["spark-master"]["command"]
    port = master[master.index("--port") + 1]
    assert f"{port}:{port}" in PORTS["spark-master"]["ports"]
    assert SERVICES["spark-worker"]["command"][-1] == f"spark://spark-master:{port}"
    for job in ("import", "analyze"):
        args = cli_args(SERVICES[job]["command"])
        assert args.master == f"spark://spark-master:{port}"
        assert [c.split("=") for c in args.conf] == [
            ["spark.driver.host", SERVICES[job]["hostname"]]
        ]


def test_every_timerstore_command_parses_and_its_paths_are_mounted():
    commands = {
        n: s["command"]
        for n, s in SERVICES.items()
        if s.get("image") == "timerstore:latest" and "command" in s and n not in CLUSTER
    }
    assert set(commands) == {"import", "export", "analyze"}
    handlers = {n: cli_args(c).handler.__name__ for n, c in commands.items()}
    assert handlers == {
        "import": "run_import_command",
        "export": "run_export_command",
        "analyze": "run_analyze_command",
    }
    imp = cli_args(commands["import"])
    assert mounted(SERVICES["import"], imp.input) and mounted(SERVICES["spark-worker"], imp.input)
    for service in ("import", "spark-worker", "timerstore"):  # the same path in all three
        assert mounts(SERVICES[service])["/data/staging"] == "staging"
    assert imp.stage_dir.startswith("/data/staging/")
    assert imp.admin_key == "change-me"
    export = cli_args(commands["export"])
    analyze = cli_args(commands["analyze"])
    assert export.out == analyze.deliveries and mounted(SERVICES["analyze"], analyze.out)
    assert mounts(SERVICES["export"])[export.data_dir] == mounts(SERVICES["timerstore"])["/data"]


def test_the_service_port_environment_and_health_check_match_the_app():
    svc = SERVICES["timerstore"]
    env = {k: interpolate(str(v)) for k, v in svc["environment"].items()}
    settings = load_settings(environ=env)  # raises on an unknown TIMERSTORE_ variable
    assert settings.admin_keys == ("change-me",) and settings.data_dir == "/data"
    assert f"{settings.port}:{settings.port}" in PORTS["timerstore"]["ports"]
    assert not any("ports" in s for s in SERVICES.values())  # the host network cannot have them
    server = cli_args(SERVICES["import"]["command"]).server
    assert server == f"http://timerstore:{settings.port}"
    test = svc["healthcheck"]["test"]
    assert test[:2] == ["CMD", "python"]
    [url] = re.findall(r"http://127\.0\.0\.1:(\d+)(/\w+)", test[-1])
    assert int(url[0]) == settings.port and url[1] == "/readyz"
    from api.app import create_app

    paths = create_app(settings).openapi()["paths"]
    assert "get" in paths["/readyz"] and "post" in paths["/v1/admin/ingest"]


def test_named_volumes_are_declared_and_bind_mounts_exist():
    for name, service in SERVICES.items():
        for source in mounts(service).values():
            if source.startswith("."):
                assert (ROOT / source).is_dir(), (name, source)
            else:
                assert source in COMPOSE["volumes"], (name, source)
        build = service.get("build")
        if build:
            assert (ROOT / build["context"] / build["dockerfile"]).is_file()


@pytest.mark.parametrize("path", ["Dockerfile", "docker/spark-worker.Dockerfile"])
def test_dockerfile_copies_existing_paths(path):
    for word, rest in dockerfile(ROOT / path):
        if word == "COPY" and not rest.startswith("--from="):
            *sources, _target = shlex.split(rest)
            for source in sources:
                if source.startswith(WHEELHOUSE):
                    # wheels of packages the lock pins, in the folder the script fills
                    assert f'"$ROOT/{WHEELHOUSE}"' in BUILD_SCRIPT
                    name = source.removeprefix(WHEELHOUSE).strip("/").removesuffix("-*")
                    assert not name or name in LOCK_PINS, source
                else:
                    assert (ROOT / source).exists(), source


def test_pip_installs_only_from_the_wheelhouse():
    for path in ("Dockerfile", "docker/spark-worker.Dockerfile"):
        runs = [rest for word, rest in dockerfile(ROOT / path) if word == "RUN"]
        installs = [r for r in runs if "pip install" in r]
        assert installs, path
        for run in installs:
            for command in run.split("&&"):
                if "pip install" in command:
                    assert "--no-index" in command, (path, command)


def test_the_offline_override_builds_on_the_local_base():
    [base_image] = re.findall(r"^BASE_IMAGE=(\S+)$", BUILD_SCRIPT, re.M)
    assert OFFLINE["timerstore"]["build"]["args"] == {"BASE_IMAGE": base_image}
    service_image = SERVICES["timerstore"]["image"]
    # the service image carries Spark (PySpark's package at /opt/spark) and Python 3.11
    assert OFFLINE["spark-worker"]["build"]["args"] == {"SPARK_IMAGE": service_image}
    assert OFFLINE["spark-master"]["image"] == service_image
    assert "ln -s /opt/venv/lib/python3.11/site-packages/pyspark /opt/spark" in " ".join(
        rest for word, rest in dockerfile(ROOT / "Dockerfile") if word == "RUN"
    )
    assert "docker-compose.offline.yml" in BUILD_SCRIPT


def test_the_test_override_keeps_every_container_on_the_host_network():
    assert set(TEST) == set(SERVICES)  # the cluster profile's too (tests/docker runs it)
    nodes = 0
    for name in CLUSTER:
        env = {k: str(v) for k, v in TEST[name].get("environment", {}).items()}
        addresses = [a for k, a in env.items() if k.startswith("TIMERSTORE_CLUSTER__")]
        assert all(a.count("//127.0.0.1:") == a.count("//") for a in addresses), (name, env)
        nodes += "TIMERSTORE_CLUSTER__NATS_URLS" in env
    assert nodes == 3  # the three nodes' NATS and advertise URLs were checked above
    for name, service in TEST.items():
        assert service["network_mode"] == "host", name
        command = " ".join(service.get("command", []))
        for host in SERVICES:  # compose-network names do not resolve on the host network
            assert f"//{host}:" not in command and f"={host}" not in command, (name, host)
    env = {k: str(v) for k, v in TEST["timerstore"]["environment"].items()}
    assert env["TIMERSTORE_HOST"] == "127.0.0.1"
    for job in ("import", "analyze"):
        args = cli_args(TEST[job]["command"])
        assert args.master.startswith("spark://127.0.0.1:")
        assert "spark.driver.host=127.0.0.1" in args.conf


def test_service_dockerfile_matches_the_project():
    steps = dockerfile(ROOT / "Dockerfile")
    [default] = re.findall(r"^ARG BASE_IMAGE=(\S+)$", (ROOT / "Dockerfile").read_text(), re.M)
    assert default.startswith("python:3.11-")  # requires-python = ">=3.11,<3.12"
    stages = [rest for word, rest in steps if word == "FROM"]
    assert stages[-1] == "${BASE_IMAGE}" and all(s.startswith("${BASE_IMAGE}") for s in stages)
    env = dict(re.findall(r"(\w+)=(\S+)", " ".join(rest for word, rest in steps if word == "ENV")))
    settings = load_settings(environ={k: v for k, v in env.items() if k.startswith("TIMERSTORE_")})
    [expose] = [rest for word, rest in steps if word == "EXPOSE"]
    assert int(expose) == settings.port and settings.host == "0.0.0.0"
    [cmd] = [rest for word, rest in steps if word == "CMD"]
    assert cli_args(exec_form(cmd)).handler.__module__ == "api.server"
    [health] = [rest for word, rest in steps if word == "HEALTHCHECK"]
    assert f"127.0.0.1:{settings.port}/readyz" in health
    compose_test = SERVICES["timerstore"]["healthcheck"]["test"]
    assert compose_test == ["CMD", *exec_form(health.split("CMD ", 1)[1])]


def test_worker_dockerfile_pins_what_the_executors_import():
    text = (ROOT / "docker/spark-worker.Dockerfile").read_text()
    pins = dict(re.findall(r"([a-z0-9_-]+)==(\S+)", text))
    assert pins == {k: PY_PINS[k] for k in ("rocksdict", "msgspec", "pyarrow")}
    assert "python3.11" in text  # executors run the driver's Python minor version


def test_the_service_image_copies_every_package_the_project_installs():
    """A new top-level package (the console script's ``timerstore``) must reach the image."""
    text = (ROOT / "pyproject.toml").read_text()
    [include] = re.findall(r"^include = \[(.*)\]$", text, re.M)
    packages = {name.strip().strip('"').rstrip("*") for name in include.split(",")}
    copied = {rest.split()[0] for word, rest in dockerfile(ROOT / "Dockerfile") if word == "COPY"}
    assert packages and packages <= copied, packages - copied
