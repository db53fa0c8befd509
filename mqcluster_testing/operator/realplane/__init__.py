"""Tests on a real Kubernetes control plane: ``../shared/kube`` (etcd, kube-apiserver and
kube-controller-manager v1.36 on loopback, like controller-runtime's envtest; no kubelet,
no scheduler), with a node agent of ours as the kubelet.

Fixtures (registered in tests/operator/conftest.py; ask for them by name):

- ``kube`` (session): the running control plane, a ``controlplane.Kube``. kube-up once per
  test session, kube-down at its end whatever happened. ``kube.kubeconfig`` (Path, the
  admin's), ``kube.env()`` (os.environ with KUBECONFIG set, for subprocesses: kubectl, helm,
  ``kopf run``), ``kube.connection()`` (kopf.ConnectionInfo), ``kube.operator_api()`` (the
  operator's ``Api`` class with those credentials), ``kube.api()`` (a ``KubeApi``: ``Api``
  plus ``request(method, path, ...)``, ``get_path``, ``delete_path`` and ``watch``),
  ``kube.service_account_token(api, ns, sa)`` and ``controlplane.token_kubeconfig`` to run
  something as a ServiceAccount. Skipped, with the reason, only where the kit is absent
  (a checkout without ``../shared``). Pods' in-cluster config (10.96.0.1) is unreachable:
  give code under test the kubeconfig.
- ``kube_api``: a ``KubeApi`` of the test (admin), closed afterwards.
- ``kube_crds``: the ``kube`` after ``crds/*.yaml`` were server-side applied (once per
  control plane) and are served.
- ``kube_namespace`` (str): a fresh namespace named after the test, deleted afterwards
  with its pods force-deleted.
- ``node_agent``: a started ``node_agent.NodeAgent`` for ``kube_namespace`` (CRDs applied):
  it binds the real StatefulSet controller's pods to its Node, runs them as local
  processes on 127.n.0.x, writes their status, restarts dead processes and finalizes
  deleted pods. ``node_agent.mirror`` (a ``mirror.Mirror``) holds the namespace's objects,
  kept current by watches, read with the emulator's calls: ``live(plural, ns, name)``,
  ``all(plural)``. See node_agent.py for ``running``, ``started``, ``kill``, ``hold``,
  ``release``, ``broken_images``, ``resolve``.

The operator in-process (kopf in its own thread, short intervals, fake or resolving
probes) against the real API server: ``kopf_harness.running_operator(cluster=
cluster.real_cluster(kube, node_agent.mirror), ...)`` (see follow/test_migration_full_loop.py's
``running_loop``); as the chart runs it (``kopf run`` with the Deployment's args, a token
of the chart's ServiceAccount): test_chart_operator_real.py.

A minimal test::

    async def test_something(kube_api, node_agent):
        ns = node_agent.namespace
        await kube_api.create({"apiVersion": "mqcluster.io/v1alpha1", "kind": "Controller",
                               "metadata": {"name": "mqc", "namespace": ns},
                               "spec": {"replicas": 1}})
        ...  # run the operator, then poll node_agent.mirror.live("v1/pods", ns, "mqc-0")
"""
