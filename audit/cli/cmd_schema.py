"""``claimtrail schema``: print the store DDL (single node or cluster) or the record JSON schema."""

from __future__ import annotations

import argparse
import json

from audit.errors import UserError
from audit.store import migrations
from audit.store.connection import IDENTIFIER, resolve_dsn


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "schema", help="print the ClickHouse DDL of the store, or the decision record JSON schema",
        description="Print the DDL every migration applies. With --cluster the same tables come out as "
                    "Replicated*MergeTree ON CLUSTER plus Distributed tables sharded by decision.")
    parser.add_argument("--cluster", metavar="NAME", help="render for this ClickHouse cluster (ON CLUSTER)")
    parser.add_argument("--dsn", help="take the database name from this DSN (default: CLAIMTRAIL_DSN or embedded)")
    parser.add_argument("--record", action="store_true", help="print the decision record JSON schema instead")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.record:
        from audit.records import record_json_schema

        print(json.dumps(record_json_schema(), indent=2, sort_keys=True))
        return 0
    database = resolve_dsn(args.dsn).database
    if args.cluster is not None:
        if not IDENTIFIER.match(args.cluster):
            raise UserError(f"--cluster {args.cluster!r}: must be a plain identifier (letters, digits, _)")
        statements = migrations.cluster_ddl(database, args.cluster)
    else:
        statements = migrations.single_node_ddl(database)
    print(";\n\n".join(statements) + ";")
    return 0
