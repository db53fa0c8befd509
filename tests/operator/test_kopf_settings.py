import kopf
import pytest

from mqcluster_operator import kopf_settings


def test_every_watch_stream_and_request_is_bounded() -> None:
    settings = kopf.OperatorSettings()
    assert settings.watching.server_timeout is None
    kopf_settings.configure(settings, env={})
    watching, networking = settings.watching, settings.networking
    assert watching.server_timeout and watching.client_timeout and watching.connect_timeout
    # The server ends a quiet stream first; the client gives up only on a dead one.
    assert watching.server_timeout < watching.client_timeout
    assert networking.request_timeout and networking.connect_timeout


def test_two_replicas_get_distinct_peering_priorities() -> None:
    priorities = set()
    for pod in ("mqcluster-operator-7d9f-abcde", "mqcluster-operator-7d9f-fghij"):
        settings = kopf.OperatorSettings()
        kopf_settings.configure(settings, env={"POD_NAME": pod})
        priorities.add(settings.peering.priority)
    assert len(priorities) == 2 and all(p > 0 for p in priorities)


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



def test_the_watch_server_timeout_is_sent_as_an_integer() -> None:
    """kopf sends ``str(server_timeout)`` as ``timeoutSeconds``; the API server refuses
    ``300.0`` (strconv.ParseInt), so the default and an override are whole numbers."""
    for env, want in (({}, "300"), ({"MQCLUSTER_WATCH_SERVER_TIMEOUT_SECONDS": "45"}, "45")):
        settings = kopf.OperatorSettings()
        kopf_settings.configure(settings, env=env)
        assert isinstance(settings.watching.server_timeout, int)
        assert str(settings.watching.server_timeout) == want


@pytest.mark.parametrize("raw", ["300.0", "1e3", "soon", "0", "-5"])
def test_a_server_timeout_that_is_not_a_whole_positive_number_is_refused(raw: str) -> None:
    with pytest.raises(ValueError, match="MQCLUSTER_WATCH_SERVER_TIMEOUT_SECONDS"):
        kopf_settings.configure(
            kopf.OperatorSettings(), env={"MQCLUSTER_WATCH_SERVER_TIMEOUT_SECONDS": raw}
        )
