"""Pure builders: custom resource spec in, Kubernetes objects (plain dicts) out."""

from .broker import build_brokergroup
from .controller import ControllerView, build_controller, controller_view
from .meta import Owner, SpecError

__all__ = [
    "ControllerView",
    "Owner",
    "SpecError",
    "build_brokergroup",
    "build_controller",
    "controller_view",
]
