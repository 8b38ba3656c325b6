"""``python -m bench`` (``make bench``): every benchmark, one after the other."""

from __future__ import annotations

from bench import storage

if __name__ == "__main__":
    storage.main()
