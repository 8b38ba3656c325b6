"""``python -m bench`` (``make bench``): every benchmark, one after the other (the Spark one
needs Java 17).

``python -m bench --quick`` runs each with smaller counts.
"""

from __future__ import annotations

import sys

from bench import broker, client_perf, groups, spark, storage

if __name__ == "__main__":
    quick = "--quick" in sys.argv[1:]
    storage.main(mib=64 if quick else 512)
    broker.main(quick=quick)
    groups.main(quick=quick)
    client_perf.main(num_records=30_000 if quick else 300_000, rounds=1 if quick else 3)
    spark.main(quick=quick)
