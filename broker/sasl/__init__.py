"""SASL authentication for SASL_PLAINTEXT listeners: PLAIN and SCRAM-SHA-256/512.

- ``config``: each listener's security protocol, enabled mechanisms, PLAIN users (JAAS) and
  re-authentication interval, from Kafka's keys (``sasl.jaas.config`` parsed by
  ``protocol.jaas``, shared with the client);
- ``plain``, ``scram``: the mechanism servers, sans-IO (token in, token out, one error type);
- ``authenticator``: a connection's authentication state machine (Kafka's
  ``SaslServerAuthenticator``), driven by ``broker.connection``.

Nothing here does I/O; ``broker.connection`` owns one ``SaslAuthenticator`` per SASL connection.
"""
