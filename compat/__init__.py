"""``make compat``: peer clients' own test suites run against a real Samsa broker.

Nothing here is part of ``make test``. The suites are downloaded at run time into
``.cache/compat/`` (outside git); results go to ``compat/results/`` (also outside git).
"""
