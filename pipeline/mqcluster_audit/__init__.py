"""Audit pipeline on PySpark: replica consistency, consumer lag, lost and duplicated messages.

``segments``/``stores`` read the broker's files (pure, no Spark); ``sources`` registers
them as PySpark data sources (``mqcluster.commitlog``, ``mqcluster.epochs``,
``mqcluster.consumequeue``, ``mqcluster.offsets``, ``mqcluster.history``); ``jobs``
holds the checks; ``report`` writes Parquet, a JSON summary and an HTML page;
``cli`` is ``mqaudit``.
"""
