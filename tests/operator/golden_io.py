"""Golden files: YAML with literal blocks for multi-line strings; REGEN_GOLDEN=1 rewrites."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

GOLDEN = Path(__file__).parent / "golden"


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump_all(objs: list[dict[str, Any]]) -> str:
    return yaml.dump_all(objs, Dumper=_Dumper, sort_keys=False, width=120)


def check_golden(name: str, objs: list[dict[str, Any]]) -> None:
    path = GOLDEN / f"{name}.yaml"
    text = dump_all(objs)
    if os.environ.get("REGEN_GOLDEN") == "1" or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if os.environ.get("REGEN_GOLDEN") != "1":
            raise AssertionError(f"golden file {path.name} was missing; written, review it")
        return
    assert text == path.read_text(), f"{path.name} differs; REGEN_GOLDEN=1 to rewrite, then review"
