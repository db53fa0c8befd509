"""Write the pyproject.toml of one image's distribution, cut from the repository's.

The repository is one distribution with three packages; each image installs only what its
commands import (run at build time by the Dockerfiles, standard library only):

- broker: ``mqcluster`` and its server commands. The official client package is installed
  without its dependencies (opentelemetry, grpcio-tools): the servers only load its
  generated gRPC stubs (mqcluster/protocol/grpc_stubs.py).
- operator: ``mqcluster_operator`` (without its local demo tools) and the parts of
  ``mqcluster`` it imports; not the gRPC endpoint, so no grpcio, protobuf or client.

    python3 distribution.py IMAGE PYPROJECT OUT_DIR

writes OUT_DIR/pyproject.toml, OUT_DIR/requirements.txt (the distribution's dependencies,
installed in a layer of their own that source changes leave cached) and OUT_DIR/no-deps.txt
(requirements to install with ``--no-deps``).
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ImageDist:
    where: tuple[str, ...]
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    extras: tuple[str, ...]
    drop: frozenset[str]  # dependencies (by name) left out
    no_deps: frozenset[str]  # dependencies installed without their own
    script_modules: tuple[str, ...]  # console scripts whose module starts with one of these


GRPC = frozenset({"grpcio", "protobuf", "rocketmq-python-client"})

IMAGES = {
    "broker": ImageDist(
        where=("broker_image",),
        include=("mqcluster", "mqcluster.*"),
        exclude=(),
        extras=(),
        drop=frozenset(),
        no_deps=frozenset({"rocketmq-python-client"}),
        script_modules=("mqcluster.",),
    ),
    "operator": ImageDist(
        where=("broker_image", "operator"),
        include=("mqcluster", "mqcluster.*", "mqcluster_operator", "mqcluster_operator.*"),
        exclude=("mqcluster.broker.grpc*", "mqcluster.proxy*", "mqcluster_operator.local*"),
        extras=("operator",),
        drop=GRPC,
        no_deps=frozenset(),
        script_modules=(),  # kopf is the command
    ),
}


def requirement_name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    if match is None:
        raise ValueError(f"cannot read a package name from requirement {requirement!r}")
    return re.sub(r"[-_.]+", "-", match.group(0)).lower()


def toml_list(values: list[str]) -> str:
    return "[" + ", ".join(json.dumps(v) for v in values) + "]"


def render(image: str, project: dict) -> tuple[str, list[str]]:
    """The image's pyproject.toml text and its no-deps requirements."""
    try:
        dist = IMAGES[image]
    except KeyError:
        raise SystemExit(f"unknown image {image!r}; expected one of {sorted(IMAGES)}") from None
    meta = project["project"]
    requirements = list(meta["dependencies"])
    for extra in dist.extras:
        requirements += meta["optional-dependencies"][extra]
    deps, no_deps = [], []
    for req in requirements:
        name = requirement_name(req)
        if name in dist.no_deps:
            no_deps.append(req)
        elif name not in dist.drop:
            deps.append(req)
    scripts = {
        name: target for name, target in meta.get("scripts", {}).items()
        if target.startswith(dist.script_modules) and dist.script_modules
    }
    lines = [
        "[build-system]",
        f"requires = {toml_list(project['build-system']['requires'])}",
        f"build-backend = {json.dumps(project['build-system']['build-backend'])}",
        "",
        "[project]",
        f"name = {json.dumps(meta['name'] + '-' + image)}",
        f"version = {json.dumps(meta['version'])}",
        f"requires-python = {json.dumps(meta['requires-python'])}",
        f"dependencies = {toml_list(deps)}",
        "",
        "[project.scripts]",
        *(f"{name} = {json.dumps(target)}" for name, target in sorted(scripts.items())),
        "",
        "[tool.setuptools.packages.find]",
        f"where = {toml_list(list(dist.where))}",
        f"include = {toml_list(list(dist.include))}",
        f"exclude = {toml_list(list(dist.exclude))}",
        "",
    ]
    return "\n".join(lines), no_deps


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    image, pyproject, out_dir = argv
    text, no_deps = render(image, tomllib.loads(Path(pyproject).read_text()))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "pyproject.toml").write_text(text)
    (out / "requirements.txt").write_text(
        "".join(f"{r}\n" for r in tomllib.loads(text)["project"]["dependencies"])
    )
    (out / "no-deps.txt").write_text("".join(f"{r}\n" for r in no_deps))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
