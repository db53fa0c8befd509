from __future__ import annotations

import pytest

from chaos.netns import probe


@pytest.fixture(scope="session")
def netns() -> None:
    """Skip where network namespaces cannot be made (the suite needs root)."""
    reason = probe()
    if reason is not None:
        pytest.skip(f"chaos tests need network namespaces: {reason}")
