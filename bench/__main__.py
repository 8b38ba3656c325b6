"""``python -m bench`` (``make bench``): every benchmark, one after the other.

``python -m bench --quick`` runs each with smaller counts.
"""

from __future__ import annotations

import sys

from bench import broker, groups, storage

if __name__ == "__main__":
    quick = "--quick" in sys.argv[1:]
    storage.main(mib=64 if quick else 512)
    broker.main(quick=quick)
    groups.main(quick=quick)
