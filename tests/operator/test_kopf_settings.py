import kopf
import pytest

from mqcluster_operator import kopf_settings


def test_watch_streams_get_explicit_timeouts() -> None:
    settings = kopf.OperatorSettings()
    assert settings.watching.server_timeout is None
    kopf_settings.configure(settings, env={})
    assert settings.watching.server_timeout == 300.0
    assert settings.watching.client_timeout == 330.0
    assert settings.watching.connect_timeout == 30.0
    assert settings.networking.request_timeout == 60.0
    assert settings.networking.connect_timeout == 30.0


def test_environment_overrides_a_timeout() -> None:
    settings = kopf.OperatorSettings()
    kopf_settings.configure(settings, env={"MQCLUSTER_WATCH_SERVER_TIMEOUT_SECONDS": "60"})
    assert settings.watching.server_timeout == 60.0


@pytest.mark.parametrize("raw", ["soon", "0", "-5"])
def test_bad_override_names_the_variable(raw: str) -> None:
    with pytest.raises(ValueError, match="MQCLUSTER_WATCH_CLIENT_TIMEOUT_SECONDS"):
        kopf_settings.configure(
            kopf.OperatorSettings(), env={"MQCLUSTER_WATCH_CLIENT_TIMEOUT_SECONDS": raw}
        )
