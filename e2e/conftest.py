"""``pytest e2e``: the operator and the broker on a real cluster.

Two ways to get one:

- ``--kubeconfig PATH``: an existing cluster (kind, a cloud cluster, ...), with the images
  from a registry (``--image-registry``, ``--broker-image``, ``--operator-image``,
  ``--image-tag``, ``--upgrade-tag``); needs kubectl and helm.
- ``--e2e``: a kind cluster made here, with both images built and loaded; needs docker,
  kind, kubectl and helm.

Without either every test is skipped, with the reason. Every check here also runs in CI
against the real control plane or the emulator with real broker processes; see
e2e/README.md for the pairs.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.kube import (
    Images,
    Kube,
    build_images,
    create_cluster,
    delete_cluster,
    helm_install,
    helm_uninstall,
    images_from,
    load_image,
    missing_tools,
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("e2e", "end-to-end suite (e2e/README.md)")
    group.addoption("--kubeconfig", metavar="PATH",
                    help="run the e2e suite against the existing cluster of this kubeconfig")
    group.addoption("--image-registry", metavar="REG",
                    help="with --kubeconfig: images REG/mqcluster/broker and "
                         "REG/mqcluster/operator")
    group.addoption("--broker-image", metavar="REPO[:TAG]",
                    help="the broker image (default mqcluster/broker, under --image-registry)")
    group.addoption("--operator-image", metavar="REPO[:TAG]",
                    help="the operator image (default mqcluster/operator, under "
                         "--image-registry)")
    group.addoption("--image-tag", metavar="TAG", help="tag of both images (default e2e)")
    group.addoption("--upgrade-tag", metavar="TAG",
                    help="the broker image's tag the upgrade test rolls to (default e2e-next)")
    group.addoption("--e2e", action="store_true", help="run the suite on a new kind cluster")
    group.addoption("--e2e-keep", action="store_true",
                    help="keep the cluster (kind) or the release and namespace afterwards")


def skip_reason(config: pytest.Config) -> str | None:
    if config.getoption("--kubeconfig"):
        path = Path(config.getoption("--kubeconfig"))
        if not path.is_file():
            return f"--kubeconfig {path}: no such file"
        return missing_tools(kind=False)
    if config.getoption("--e2e"):
        return missing_tools(kind=True)
    return "give --kubeconfig PATH (an existing cluster, images from a registry) or --e2e" \
           " (a kind cluster made here)"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = skip_reason(config)
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"e2e skipped: {reason} (see e2e/README.md)")
    for item in items:
        if "e2e" in item.nodeid.split("/")[0]:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def images(request: pytest.FixtureRequest) -> Images:
    opt = request.config.getoption
    return images_from(opt("--image-registry"), opt("--broker-image"),
                       opt("--operator-image"), opt("--image-tag"), opt("--upgrade-tag"))


@pytest.fixture(scope="session")
def kube(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
         images: Images) -> Iterator[Kube]:
    keep = request.config.getoption("--e2e-keep")
    kubeconfig = request.config.getoption("--kubeconfig")
    if kubeconfig:
        kube = Kube("existing", namespace=f"mq-e2e-{uuid.uuid4().hex[:6]}",
                    kubeconfig=Path(kubeconfig).resolve())
        helm_install(kube, images)
        try:
            yield kube
        finally:
            if not keep:
                helm_uninstall(kube)
        return
    name = f"mq-e2e-{uuid.uuid4().hex[:6]}"
    kube = Kube(name, kubeconfig=tmp_path_factory.mktemp("kind") / "kubeconfig")
    build_images(images)
    create_cluster(name, kube.kubeconfig)
    try:
        for image in (images.broker_ref(), f"{images.operator}:{images.operator_tag}"):
            load_image(name, image)
        # The upgrade test rolls the group to another tag of the same build.
        subprocess.run(["docker", "tag", images.broker_ref(),
                        images.broker_ref(images.upgrade_tag)], check=True)
        load_image(name, images.broker_ref(images.upgrade_tag))
        helm_install(kube, images)
        yield kube
    finally:
        if not keep:
            delete_cluster(name)


@pytest.fixture(scope="session")
def examples() -> Path:
    return Path(__file__).resolve().parent.parent / "examples"
