"""Samsa's fault harness: real node processes under seeded faults, client histories and the
checker that judges them (issue 13). ``python -m tests.faults --help`` runs a campaign."""
