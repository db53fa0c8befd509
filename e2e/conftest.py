"""``pytest e2e --e2e``: the operator and the broker on a kind cluster.

Skipped (with the reason) unless ``--e2e`` is given and docker, kind, kubectl and helm
work on this machine. Every check here also runs in CI against the API emulator with
real broker processes; see e2e/README.md for the pairs.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.kube import (
    BROKER_IMAGE,
    OPERATOR_IMAGE,
    Kube,
    build_images,
    create_cluster,
    delete_cluster,
    helm_install,
    load_image,
    missing_tools,
)

TAG = "e2e"
UPGRADE_TAG = "e2e-next"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--e2e", action="store_true", help="run the kind end-to-end suite")
    parser.addoption("--e2e-keep", action="store_true", help="keep the kind cluster afterwards")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = None if config.getoption("--e2e") else "the kind suite runs with --e2e"
    reason = reason or missing_tools()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"e2e skipped: {reason} (see e2e/README.md)")
    for item in items:
        if "e2e" in item.nodeid.split("/")[0]:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def kube(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[Kube]:
    name = f"mq-e2e-{uuid.uuid4().hex[:6]}"
    kube = Kube(name, kubeconfig=tmp_path_factory.mktemp("kind") / "kubeconfig")
    build_images(TAG)
    create_cluster(name, kube.kubeconfig)
    try:
        for image in (f"{BROKER_IMAGE}:{TAG}", f"{OPERATOR_IMAGE}:{TAG}"):
            load_image(name, image)
        # The upgrade test rolls the group to another tag of the same build.
        os.system(f"docker tag {BROKER_IMAGE}:{TAG} {BROKER_IMAGE}:{UPGRADE_TAG}")
        load_image(name, f"{BROKER_IMAGE}:{UPGRADE_TAG}")
        helm_install(kube, TAG)
        yield kube
    finally:
        if not request.config.getoption("--e2e-keep"):
            delete_cluster(name)


@pytest.fixture(scope="session")
def examples() -> Path:
    return Path(__file__).resolve().parent.parent / "examples"
