"""The e2e suite's options: images from a registry, an existing cluster's kubeconfig."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from e2e.kube import Images, images_from, split_ref

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("ref", "repo", "tag"), [
    ("mqcluster/broker", "mqcluster/broker", "d"),
    ("mqcluster/broker:1.2", "mqcluster/broker", "1.2"),
    ("registry.local:5000/mq/broker", "registry.local:5000/mq/broker", "d"),
    ("registry.local:5000/mq/broker:rc1", "registry.local:5000/mq/broker", "rc1"),
])
def test_an_image_reference_splits_at_the_tag_not_at_a_registry_port(
        ref: str, repo: str, tag: str) -> None:
    assert split_ref(ref, "d") == (repo, tag)


def test_images_from_a_registry_and_overrides() -> None:
    assert images_from(None, None, None, None, None) == Images()
    images = images_from("reg.example:5000/team", None, None, "v1", None)
    assert images.broker_ref() == "reg.example:5000/team/mqcluster/broker:v1"
    assert images.broker_ref(images.upgrade_tag) == \
        "reg.example:5000/team/mqcluster/broker:e2e-next"
    assert (images.operator, images.operator_tag) == ("reg.example:5000/team/mqcluster/operator",
                                                      "v1")
    images = images_from("reg", "other/broker:b1", "op:o1", None, "b2")
    assert (images.broker_ref(), images.broker_ref(images.upgrade_tag)) == (
        "other/broker:b1", "other/broker:b2")
    assert (images.operator, images.operator_tag) == ("op", "o1")


def e2e_run(*args: str) -> str:
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "e2e", "-rs", *args], capture_output=True, text=True, cwd=REPO,
                            timeout=120)
    return result.stdout + result.stderr


def test_without_a_cluster_the_suite_skips_and_says_how_to_give_one(tmp_path: Path) -> None:
    out = e2e_run()
    assert "give --kubeconfig PATH" in out and "passed" not in out
    out = e2e_run("--kubeconfig", str(tmp_path / "missing"))
    assert f"--kubeconfig {tmp_path / 'missing'}: no such file" in out
