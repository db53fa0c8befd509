"""The wire contracts every process shares: request and response codes, headers and
their codecs for the broker, name server, controller and DLedger; the group view
(``election``); epoch entries and the sync point (``epochs``).

Below every server and tool: modules here import only ``mqcluster.wire`` and
``mqcluster.common`` (checked by ``lint-imports``), so a server, the client, mqadmin,
the proxy and the operator agree on one definition without importing each other.
"""
