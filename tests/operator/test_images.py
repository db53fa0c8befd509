"""Static checks of the two Dockerfiles and of what each image installs (tools/images).

test_images_run.py builds and runs the images themselves with podman."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
BROKER = REPO / "broker_image" / "Dockerfile"
OPERATOR = REPO / "operator" / "Dockerfile"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def _load_distribution():  # tools/ is not a package
    spec = importlib.util.spec_from_file_location(
        "images_distribution", REPO / "tools" / "images" / "distribution.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


distribution = _load_distribution()


def instructions(path: Path) -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", path.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            op, _, rest = line.partition(" ")
            out.append((op.upper(), rest.strip()))
    return out


def final_stage(ins: list[tuple[str, str]]) -> list[tuple[str, str]]:
    last_from = max(i for i, (op, _) in enumerate(ins) if op == "FROM")
    return ins[last_from:]


@pytest.mark.parametrize("path", [BROKER, OPERATOR], ids=["broker", "operator"])
def test_base_is_a_build_argument_defaulting_to_the_public_python_image(path: Path) -> None:
    ins = instructions(path)
    first_from = next(i for i, (op, _) in enumerate(ins) if op == "FROM")
    args = [rest for op, rest in ins[:first_from] if op == "ARG"]
    assert "BASE=python:3.11-slim" in args and "BUILD_BASE=${BASE}" in args
    froms = [rest for op, rest in ins if op == "FROM"]
    assert froms == ["${BUILD_BASE} AS build", "${BASE}"]


@pytest.mark.parametrize("path", [BROKER, OPERATOR], ids=["broker", "operator"])
def test_final_stage_runs_as_uid_10001_from_a_copied_venv_without_leftovers(path: Path) -> None:
    final = final_stage(instructions(path))
    users = [rest for op, rest in final if op == "USER"]
    assert users == ["10001:10001"]
    # The only thing taken from the build stage is the installed virtualenv: no wheels or
    # sources copied in one layer and deleted in a later one.
    copies = [rest for op, rest in final if op in {"COPY", "ADD"}]
    assert copies == ["--from=build /opt/mqcluster /opt/mqcluster"]
    assert not any("rm " in rest for op, rest in final if op == "RUN")
    env = " ".join(rest for op, rest in final if op == "ENV")
    assert "PATH=/opt/mqcluster/bin:$PATH" in env
    # One image, several programs on configurable ports: the pods' probes check health.
    assert not any(op == "HEALTHCHECK" for op, _ in final)


@pytest.mark.parametrize("path", [BROKER, OPERATOR], ids=["broker", "operator"])
def test_copied_sources_exist(path: Path) -> None:
    for op, rest in instructions(path):
        if op == "COPY" and "--from" not in rest:
            for source in rest.split()[:-1]:
                assert (REPO / source).exists(), source


def test_broker_distribution_has_the_server_commands_and_not_the_operator() -> None:
    text, no_deps = distribution.render("broker", PYPROJECT)
    dist = tomllib.loads(text)
    scripts = set(dist["project"]["scripts"])
    assert {"mqnamesrv", "mqcontroller", "mqbroker", "mqadmin", "mqproxy", "mqraft"} == scripts
    assert dist["tool"]["setuptools"]["packages"]["find"]["where"] == ["broker_image"]
    names = {distribution.requirement_name(r) for r in dist["project"]["dependencies"]}
    assert {"grpcio", "protobuf"} <= names
    assert not names & {"kopf", "kubernetes-asyncio", "pyyaml", "pyspark"}
    # The official client without opentelemetry and grpcio-tools: the servers load its stubs.
    assert [distribution.requirement_name(r) for r in no_deps] == ["rocketmq-python-client"]


def test_operator_distribution_leaves_out_the_grpc_endpoint_and_its_dependencies() -> None:
    text, no_deps = distribution.render("operator", PYPROJECT)
    dist = tomllib.loads(text)
    assert dist["project"]["scripts"] == {} and no_deps == []
    names = {distribution.requirement_name(r) for r in dist["project"]["dependencies"]}
    assert {"kopf", "kubernetes-asyncio", "pydantic"} <= names
    assert not names & {"grpcio", "protobuf", "rocketmq-python-client", "pyspark"}
    excluded = dist["tool"]["setuptools"]["packages"]["find"]["exclude"]
    assert set(excluded) == {"mqcluster.broker.grpc*", "mqcluster.proxy*",
                             "mqcluster_operator.local*"}


def test_unknown_image_is_refused_with_the_known_names() -> None:
    with pytest.raises(SystemExit, match=r"unknown image 'web'.*broker"):
        distribution.render("web", PYPROJECT)


def test_operator_imports_nothing_its_image_leaves_out() -> None:
    """What the kopf module imports must be in the operator image (see the exclusions)."""
    probe = (
        "import sys, mqcluster_operator.handlers\n"
        "left_out = ('grpc', 'rocketmq', 'mqcluster.broker.grpc', 'mqcluster.proxy',"
        " 'mqcluster_operator.local', 'pyspark')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in left_out"
        " or m.startswith(left_out)))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=120).stdout.strip()
    assert out == "[]"


def test_operator_image_runs_kopf_with_liveness() -> None:
    ins = dict(instructions(OPERATOR))
    assert ins["ENTRYPOINT"] == '["kopf"]'
    assert "--module=mqcluster_operator.handlers" in ins["CMD"]
    assert "--liveness=http://0.0.0.0:8080/healthz" in ins["CMD"]


def test_pyproject_scripts_are_all_in_an_image_or_known_to_be_local_tools() -> None:
    scripts = set(PYPROJECT["project"]["scripts"])
    in_images = set(tomllib.loads(distribution.render("broker", PYPROJECT)[0])
                    ["project"]["scripts"])
    # mqcluster (local demo cluster) and mqaudit (PySpark jobs) run from a checkout.
    assert scripts - in_images == {"mqcluster", "mqaudit"}


def writable_paths_problems(pod_spec: dict[str, Any]) -> list[str]:
    """HOME and TMPDIR of each container with a read-only root must lie on a volume it
    mounts writable (the official client's logs, temp files): the root is not writable."""
    problems = []
    containers = pod_spec.get("initContainers", []) + pod_spec["containers"]
    for container in containers:
        if not container.get("securityContext", {}).get("readOnlyRootFilesystem"):
            continue
        env = {e["name"]: e.get("value") for e in container.get("env", [])}
        writable = [m["mountPath"] for m in container.get("volumeMounts", [])
                    if not m.get("readOnly")]
        for key in ("HOME", "TMPDIR"):
            value = env.get(key)
            if container["name"] == "clear-store":  # runs no library that writes there
                continue
            if value is None or not any(value == p or value.startswith(p.rstrip("/") + "/")
                                        for p in writable):
                problems.append(f"{container['name']}: {key}={value} is not on a writable volume")
    return problems


def _pod_specs_built_by_the_operator() -> dict[str, dict[str, Any]]:
    from mqcluster_operator.manifests.broker import for_migration

    from .test_manifests import ALL, BROKER_CASES, BrokerGroupSpec

    out = {}
    for case, build in ALL:
        for obj in build(case):
            if obj["kind"] == "StatefulSet":
                out[case] = obj["spec"]["template"]["spec"]
    # a migration's init container too
    spec = BrokerGroupSpec.model_validate(BROKER_CASES["brokergroup-dledger"][0])
    objs = for_migration(ALL[-1][1]("brokergroup-dledger"), spec, stopped=False,
                         clear_store="m1")
    (sts,) = [o for o in objs if o["kind"] == "StatefulSet"]
    out["brokergroup-dledger-clearing"] = sts["spec"]["template"]["spec"]
    return out


@pytest.mark.parametrize("case", sorted(_pod_specs_built_by_the_operator()))
def test_operator_pods_keep_home_and_tmpdir_on_their_volumes(case: str) -> None:
    assert writable_paths_problems(_pod_specs_built_by_the_operator()[case]) == []


def test_operator_deployment_keeps_home_and_tmpdir_on_its_volume(helm: Path) -> None:
    from .chart_tools import kinds, template

    (deploy,) = kinds(template(helm))["Deployment"]
    assert writable_paths_problems(deploy["spec"]["template"]["spec"]) == []


def test_writable_paths_check_sees_home_on_the_root() -> None:
    pod = {"containers": [{
        "name": "broker",
        "securityContext": {"readOnlyRootFilesystem": True},
        "env": [{"name": "POD_NAME", "value": "x"}, {"name": "TMPDIR", "value": "/tmp/x"}],
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"},
                         {"name": "config", "mountPath": "/etc/mqcluster", "readOnly": True}],
    }]}
    assert writable_paths_problems(pod) == ["broker: HOME=None is not on a writable volume"]


def _load_build():
    spec = importlib.util.spec_from_file_location(
        "images_build", REPO / "tools" / "images" / "build.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_build_passes_the_hosts_pip_settings_and_the_files_they_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    build = _load_build()
    index = tmp_path / "mirror" / "simple"
    index.mkdir(parents=True)
    bundle = tmp_path / "ca.crt"
    bundle.write_text("x")
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\ncert = {bundle}\nextra-index-url = file://{index}\n")
    monkeypatch.setattr(build, "PIP_FILES", (str(conf),))
    for key in [k for k in os.environ if k.startswith("PIP_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("PIP_DEFAULT_TIMEOUT", "180")
    work = tmp_path / "work"
    work.mkdir()
    args = build.pip_mounts(work)
    mounts = [args[i + 1] for i in range(0, len(args), 2)]
    assert mounts[0] == f"{work / 'pip.conf'}:/etc/pip.conf:ro"
    # the CA bundle at its own path; a local index's parent (its pages link to ../files)
    assert set(mounts[1:]) == {f"{bundle}:{bundle}:ro",
                               f"{index.parent}:{index.parent}:ro"}
    written = (work / "pip.conf").read_text()
    assert "default-timeout = 180" in written and f"cert = {bundle}" in written


def test_every_image_has_a_budget_and_a_dockerfile() -> None:
    build = _load_build()
    assert {i.name for i in build.IMAGES} == set(distribution.IMAGES)
    for image in build.IMAGES:
        assert (REPO / image.dockerfile).exists() and image.budget_mb > 0


PRODUCT = {"broker_image": "mqcluster", "operator": "mqcluster_operator",
           "pipeline": "mqcluster_audit"}
MODULE_NAME = re.compile(r"\b(mqcluster(?:_operator|_audit)?(?:\.[a-z_][a-z0-9_]*)+)")


def _product_modules() -> dict[str, Path]:
    out = {}
    for base, package in PRODUCT.items():
        for path in (REPO / base / package).rglob("*.py"):
            parts = path.relative_to(REPO / base).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imports(name: str, path: Path) -> set[str]:
    """Modules ``path`` imports (a name imported from a package may be a module too)."""
    import ast

    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            out |= {base} | {f"{base}.{alias.name}" for alias in node.names}
    return out


def test_every_product_module_is_reached_from_a_command() -> None:
    """No module ships in the packages (and so in the images) that only tests and benches
    use: each is imported, directly or not, by a console script, a module a product file or
    a README runs (``python -m ...``, kopf's ``--module``), or a module so named."""
    modules = _product_modules()
    roots = {spec.partition(":")[0] for spec in PYPROJECT["project"]["scripts"].values()}
    for name, path in modules.items():  # a module naming itself (its --help) does not count
        roots |= set(MODULE_NAME.findall(path.read_text())) - {name}
    for path in (BROKER, OPERATOR, REPO / "Makefile", *(REPO / "charts").rglob("*.yaml"),
                 *(REPO / "charts").rglob("*.tpl")):
        roots |= set(MODULE_NAME.findall(path.read_text()))
    for readme in (REPO / "README.md", REPO / "operator" / "README.md"):
        roots |= set(re.findall(r"python3? -m (mqcluster[a-z_.]*)", readme.read_text()))
    reached: set[str] = set()
    todo = [m for m in roots if m in modules]
    while todo:
        name = todo.pop()
        if name in reached:
            continue
        reached.add(name)
        parent = name.rpartition(".")[0]
        todo += [m for m in (_imports(name, modules[name]) | {parent}) if m in modules]
    unreached = sorted(m for m, p in modules.items()
                       if m not in reached and p.name not in ("__init__.py", "__main__.py"))
    assert not unreached, f"only tests or benches use {unreached}: move them to mqcluster_testing"
