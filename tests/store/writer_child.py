"""A producer process for the crash test: writes numbered records and reports each durable batch.

Usage: python -m tests.store.writer_child <store dir> <count> <chunk>. After each chunk is in the
spool (fsync'ed) it prints ``acked <n>``; delivery to the store runs in the background.
"""

from __future__ import annotations

import sys

from audit.store.queries import AuditStore
from tests.store.factory import make_records


def main() -> int:
    directory, count, chunk = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    store = AuditStore.open(f"chdb://{directory}/db")
    writer = store.writer(name="child", batch_size=chunk, max_delay=0.05)
    for start in range(0, count, chunk):
        writer.write_records(make_records(min(chunk, count - start), start=start))
        writer.flush(timeout=0)  # durable in the spool; delivery continues in the background
        print(f"acked {min(start + chunk, count)}", flush=True)
    writer.flush()
    store.close()
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
