"""Authorization: may this user do this action on this resource from this address?

Super users may do everything. A Normal user needs an Allow entry that matches the
resource, the action and the source address, and no matching Deny (Deny wins).
"""

from __future__ import annotations

from dataclasses import dataclass

from mqcluster.auth.model import AclConfig, Action, Decision, User, UserType


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    message: str = ""


ALLOWED = Verdict(True)


def right(kind: str, name: str, action: Action) -> str:
    """How a right is named in refusals: ``Pub on Topic:orders``."""
    return f"{action.value} on {kind}:{name}" if name else f"{action.value} on {kind}"


class Evaluator:
    def __init__(self, config: AclConfig) -> None:
        self.config = config

    def check(self, user: User, kind: str, name: str, action: Action,
              source: str | None = None) -> Verdict:
        if user.user_type is UserType.SUPER:
            return ALLOWED
        acl = self.config.acls.get(f"User:{user.username}")
        allowed = False
        if acl is not None:
            for entry in acl.entries:
                if entry.applies(kind, name, action, source):
                    if entry.decision is Decision.DENY:
                        return Verdict(False, f"user {user.username} is denied "
                                              f"{right(kind, name, action)}")
                    allowed = True
        if allowed:
            return ALLOWED
        where = f" from {source}" if source else ""
        return Verdict(False, f"user {user.username} has no right {right(kind, name, action)}"
                              f"{where}")
