"""Build the broker and operator images with podman, without a registry (``make images``).

1. Two Debian bookworm bases from Debian's packages with mmdebstrap, imported into podman
   (made once; ``--rebuild-base`` remakes them):
   - ``mqcluster-base:bookworm``: minbase + python3 (3.11), no recommends, no docs, man
     pages or translations, and without perl (only usrmerge needed it): what the images run.
   - ``mqcluster-base-build:bookworm``: the same + python3-venv and python3-pip: what builds
     their virtualenvs.
2. Both Dockerfiles built FROM them (``--build-arg BASE=... BUILD_BASE=...``; the same
   Dockerfiles build FROM python:3.11-slim elsewhere), with the host's pip configuration
   and CA bundle mounted read-only into the build steps so pip reaches PyPI as the host does.
3. A report of each image's size, its base and the installed packages that dominate it, and
   a check against the budgets below: the build fails when an image outgrows its budget.

Budgets (MB, as ``podman image inspect`` counts the uncompressed layers). The runtime base
holds python3.11 and its standard library, coreutils, libc, apt and dpkg. The broker's
virtualenv is mostly grpcio (the client endpoint), uvloop, aiohttp and pydantic; the
operator's kubernetes_asyncio (generated API models; the operator uses only its
ApiClient), then the same uvloop, aiohttp and pydantic, and pyyaml. The build prints each
image's size and its largest packages (the README's table holds the figures); each budget
leaves about a tenth for dependency releases, and is below what each regression this
build removed would weigh: wheels left in a layer, the official client's own dependencies
in the broker (grpcio-tools, opentelemetry, setuptools), grpcio and protobuf in the
operator, or a new dependency of that size.

    python3 tools/images/build.py [--rebuild-base] [--only broker|operator] [--tag VERSION]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import configparser
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONTAINERS_CONF = Path(__file__).with_name("containers.conf")

BASE = "localhost/mqcluster-base:bookworm"
BUILD_BASE = "localhost/mqcluster-base-build:bookworm"
MB = 1_000_000


@dataclass(frozen=True)
class Image:
    name: str
    dockerfile: str
    budget_mb: int

    def ref(self, version: str) -> str:
        return f"localhost/mqcluster/{self.name}:{version}"


IMAGES = (
    Image("broker", "broker_image/Dockerfile", budget_mb=210),
    Image("operator", "operator/Dockerfile", budget_mb=245),
)

_COMMON_DEBOOTSTRAP = [
    "mmdebstrap", "--variant=minbase", "--aptopt=APT::Install-Recommends \"false\"",
    "--dpkgopt=path-exclude=/usr/share/doc/*", "--dpkgopt=path-exclude=/usr/share/man/*",
    "--dpkgopt=path-exclude=/usr/share/locale/*",
    "--dpkgopt=path-include=/usr/share/doc/*/copyright",
]
BASES = {
    BASE: [*_COMMON_DEBOOTSTRAP, "--include=python3",
           # perl is in minbase only for usrmerge, which has done its work by then
           "--customize-hook=chroot \"$1\" apt-get -y -q purge usrmerge perl libperl5.36"
           " perl-modules-5.36",
           "bookworm", "-"],
    BUILD_BASE: [*_COMMON_DEBOOTSTRAP,
                 "--include=python3,python3-venv,python3-pip,ca-certificates",
                 "bookworm", "-"],
}


def podman_env() -> dict[str, str]:
    """runc (crun refuses hybrid cgroups here), cgroupfs, ulimits within the machine's."""
    return {**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)}


def podman(*args: str, capture: bool = False) -> str:
    done = subprocess.run(["podman", *args], env=podman_env(), check=True, text=True,
                          stdout=subprocess.PIPE if capture else None)
    return done.stdout or ""


def image_exists(ref: str) -> bool:
    return subprocess.run(["podman", "image", "exists", ref], env=podman_env()).returncode == 0


def make_base(ref: str, work: Path) -> float:
    start = time.monotonic()
    tar = work / (ref.rsplit("/", 1)[-1].replace(":", "-") + ".tar")
    with tar.open("wb") as out:
        subprocess.run(BASES[ref], stdout=out, stderr=subprocess.DEVNULL, check=True)
    podman("import", "--quiet", str(tar), ref, capture=True)
    tar.unlink()
    return time.monotonic() - start


PIP_FILES = ("/etc/xdg/pip/pip.conf", "/etc/pip.conf", "~/.config/pip/pip.conf",
             "~/.pip/pip.conf")


def host_pip_config() -> configparser.ConfigParser:
    """pip's settings on this host: its configuration files, then PIP_* variables."""
    config = configparser.ConfigParser(interpolation=None)
    files = [os.path.expanduser(f) for f in PIP_FILES]
    if os.environ.get("PIP_CONFIG_FILE"):
        files.append(os.environ["PIP_CONFIG_FILE"])
    config.read(files)
    if not config.has_section("global"):
        config.add_section("global")
    for key, value in os.environ.items():
        if key.startswith("PIP_") and key != "PIP_CONFIG_FILE":
            config["global"][key[4:].lower().replace("_", "-")] = value
    return config


def pip_mounts(work: Path) -> list[str]:
    """Build-step mounts that let pip in the build install as it does on this host: its
    settings as /etc/pip.conf, and each file or directory they name (CA bundle, constraints,
    local indexes and wheel directories) at the same path. Read-only, and only mounted into
    the build steps: nothing of it lands in a layer."""
    config = host_pip_config()
    paths: set[str] = set()
    for section in config.sections():
        for value in config[section].values():
            for token in value.split():
                path = token.removeprefix("file://")
                if path != token:  # a local index: its pages link to files beside it
                    path = os.path.dirname(path.rstrip("/"))
                if path.startswith("/") and os.path.exists(path):
                    paths.add(path)
    conf = work / "pip.conf"
    with conf.open("w") as out:
        config.write(out)
    args = ["--volume", f"{conf}:/etc/pip.conf:ro"]
    for path in sorted(paths):
        args += ["--volume", f"{path}:{path}:ro"]
    return args


def build(image: Image, version: str, work: Path) -> float:
    start = time.monotonic()
    podman(
        "build", "--pull=never", "--network=host", "--layers",
        "--build-arg", f"BASE={BASE}", "--build-arg", f"BUILD_BASE={BUILD_BASE}",
        *pip_mounts(work),
        "--file", str(REPO / image.dockerfile), "--tag", image.ref(version), str(REPO),
    )
    return time.monotonic() - start


def image_size(ref: str) -> int:
    return int(json.loads(podman("image", "inspect", ref, capture=True))[0]["Size"])


DU_SCRIPT = r"""
import os, sys
root = sys.argv[1]
sizes = {}
for top in os.listdir(root):
    total = 0
    for base, _, files in os.walk(os.path.join(root, top)):
        for f in files:
            try:
                total += os.lstat(os.path.join(base, f)).st_size
            except OSError:
                pass
    sizes[top] = total
for name, size in sorted(sizes.items(), key=lambda kv: -kv[1])[:8]:
    print(size, name)
"""


def dominant_packages(ref: str) -> list[tuple[str, int]]:
    out = podman("run", "--rm", "--network=none", "--entrypoint", "python3", ref, "-c",
                 DU_SCRIPT, "/opt/mqcluster/lib/python3.11/site-packages", capture=True)
    rows = [line.split(" ", 1) for line in out.splitlines() if line.strip()]
    return [(name, int(size)) for size, name in rows]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rebuild-base", action="store_true")
    parser.add_argument("--only", choices=[i.name for i in IMAGES])
    default_version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    parser.add_argument("--tag", default=default_version)
    args = parser.parse_args(argv)

    for tool in ("podman",):
        if shutil.which(tool) is None:
            print(f"images: {tool} is not installed (apt-get install podman buildah runc "
                  "mmdebstrap)", file=sys.stderr)
            return 2
    missing = [ref for ref in BASES if args.rebuild_base or not image_exists(ref)]
    if missing:
        if shutil.which("mmdebstrap") is None:
            print("images: mmdebstrap is not installed (apt-get install mmdebstrap)",
                  file=sys.stderr)
            return 2
        work = Path(tempfile.mkdtemp(prefix="mqcluster-base-"))
        try:
            with concurrent.futures.ThreadPoolExecutor(len(missing)) as pool:
                took = {ref: pool.submit(make_base, ref, work) for ref in missing}
        finally:
            shutil.rmtree(work, ignore_errors=True)
        for ref, future in took.items():
            print(f"base {ref}: made in {future.result():.0f} s")

    chosen = [i for i in IMAGES if args.only in (None, i.name)]
    base_mb = image_size(BASE) / MB
    failures = []
    report = []
    for image in chosen:
        with tempfile.TemporaryDirectory(prefix="mqcluster-pip-") as work:
            seconds = build(image, args.tag, Path(work))
        size_mb = image_size(image.ref(args.tag)) / MB
        report.append((image, seconds, size_mb, dominant_packages(image.ref(args.tag))))
        if size_mb > image.budget_mb:
            failures.append(f"{image.name} image is {size_mb:.0f} MB, over its budget of "
                            f"{image.budget_mb} MB (tools/images/build.py says why)")
    print(f"\n{'image':<40} {'build':>7} {'size':>8} {'budget':>8}   (base {base_mb:.0f} MB)")
    for image, seconds, size_mb, top in report:
        print(f"{image.ref(args.tag):<40} {seconds:>6.0f}s {size_mb:>5.0f} MB"
              f" {image.budget_mb:>5} MB")
        print("    largest packages: " + ", ".join(f"{n} {s / MB:.1f} MB" for n, s in top))
    for failure in failures:
        print(f"images: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
