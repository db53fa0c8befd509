"""The operator's test support: the Kubernetes emulator (kmock, with what a real API server
does in ``apiserver``), its kubelet (``kubelet``, pods as local processes through
``pod_process``), the operator run in-process against either (``kopf_harness``), and the
real control plane with its node agent (``realplane``)."""
