"""Load the official client's generated gRPC stubs (``rocketmq.grpc_protocol``) without
running the client package's ``__init__``.

That ``__init__`` imports the whole client, whose logging set-up creates
``~/logs/rocketmq_python`` at import: on a read-only root filesystem (as the pods run)
the broker and the proxy died at start-up. It also needs opentelemetry and grpcio-tools,
which the servers never use, so the broker image installs the client package without its
dependencies. Import this module before any ``rocketmq.grpc_protocol`` import.

The ``rocketmq`` package is registered unexecuted and runs its real ``__init__`` the first
time anything else is asked of it (``from rocketmq import Producer`` in the same process,
as tests and tools do), so the official client still works next to the servers.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any

PACKAGE = "rocketmq"


class _DeferredPackage(types.ModuleType):
    """The ``rocketmq`` package whose ``__init__`` runs at the first attribute it lacks."""

    def __getattr__(self, name: str) -> Any:
        spec = self.__spec__
        if name.startswith("__") or spec is None or spec.loader is None:
            raise AttributeError(name)
        object.__setattr__(self, "__class__", types.ModuleType)  # one run; later misses are plain
        spec.loader.exec_module(self)
        return getattr(self, name)


def _register() -> None:
    if PACKAGE in sys.modules:
        return
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        raise ImportError("the rocketmq-python-client package is not installed")
    package = importlib.util.module_from_spec(spec)
    package.__class__ = _DeferredPackage
    sys.modules[PACKAGE] = package
    importlib.import_module(f"{PACKAGE}.grpc_protocol")


_register()
