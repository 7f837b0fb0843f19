"""The ClickHouse store: schema and migrations, the spooled writer, quarantine and the read side.

Everything that touches ClickHouse goes through ``clickhouse-connect``: the embedded chDB engine
(``chdb://<dir>``, the default) and a server or cluster (``http(s)://``) share one code path.
"""
