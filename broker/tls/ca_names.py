"""The certificate authorities a TLS listener names when it asks for a client certificate.

Kafka's broker (Java's JSSE) lists the subjects of its trust store's certificates in every
certificate request (TLS 1.2's ``certificate_authorities`` field of CertificateRequest, TLS 1.3's
``certificate_authorities`` extension). Clients pick their certificate by that list: Java's key
manager chooses a key whose chain leads to a listed issuer, and librdkafka (2.10 and later)
sends no certificate when none of its chain's issuers is listed. With ``ssl.client.auth=
requested`` that is the difference between a client whose certificate comes from another CA
connecting as ``User:ANONYMOUS`` (Kafka) and its handshake failing on the untrusted certificate
(an OpenSSL server that lists nothing, as Python's ``ssl`` module does: it has no call for
``SSL_CTX_set_client_CA_list``).

So ``name_trusted_authorities`` makes that one call through ``ctypes``, on the libssl the
``ssl`` module itself is linked to (looked up through the ``_ssl`` extension's handle, its
version checked against ``ssl.OPENSSL_VERSION_NUMBER``), for the ``SSL_CTX`` behind an
``ssl.SSLContext`` (CPython keeps that pointer right after the object header; it is checked by
reading the context's options and verify mode back through OpenSSL before anything is set).
The names are read by OpenSSL (``SSL_load_client_CA_file``) from the trust store's PEM: the
file, or the inline certificates written to a private temporary file that is removed at once.
Where any of this is unavailable (another Python, OpenSSL linked statically) the listener works
as before and a warning says that clients are not told the names.

Called once per server context at start-up; nothing here runs per connection.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import os
import ssl
import tempfile

__all__ = ["name_trusted_authorities", "named_authority_count"]

logger = logging.getLogger("samsa.broker.tls")


class _LibSsl:
    """The few libssl functions used here, typed."""

    def __init__(self, library: ctypes.CDLL) -> None:
        self.version_num = library.OpenSSL_version_num
        self.version_num.restype, self.version_num.argtypes = ctypes.c_ulong, []
        self.get_options = library.SSL_CTX_get_options
        self.get_options.restype, self.get_options.argtypes = ctypes.c_uint64, [ctypes.c_void_p]
        self.get_verify_mode = library.SSL_CTX_get_verify_mode
        self.get_verify_mode.restype = ctypes.c_int
        self.get_verify_mode.argtypes = [ctypes.c_void_p]
        self.load_names = library.SSL_load_client_CA_file
        self.load_names.restype, self.load_names.argtypes = ctypes.c_void_p, [ctypes.c_char_p]
        self.set_names = library.SSL_CTX_set_client_CA_list
        self.set_names.restype = None
        self.set_names.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self.get_names = library.SSL_CTX_get_client_CA_list
        self.get_names.restype, self.get_names.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
        self.count = library.OPENSSL_sk_num
        self.count.restype, self.count.argtypes = ctypes.c_int, [ctypes.c_void_p]


@functools.cache
def _libssl() -> _LibSsl | None:
    """libssl as the ``ssl`` module uses it, or None (logged) when it cannot be reached."""
    try:
        import _ssl

        library = _LibSsl(ctypes.CDLL(_ssl.__file__))
    except (ImportError, OSError, AttributeError) as error:
        logger.warning("TLS listeners cannot name their trusted CAs to clients (%s)", error)
        return None
    if library.version_num() != ssl.OPENSSL_VERSION_NUMBER:
        logger.warning("TLS listeners cannot name their trusted CAs to clients (libssl %x is "
                       "not the ssl module's %x)", library.version_num(),
                       ssl.OPENSSL_VERSION_NUMBER)
        return None
    return library


def _ssl_ctx(library: _LibSsl, context: ssl.SSLContext) -> int | None:
    """The ``SSL_CTX *`` of ``context`` (the first field after CPython's object header), or
    None when what OpenSSL reports for it is not what the context reports."""
    pointer = ctypes.c_void_p.from_address(id(context) + object.__basicsize__).value
    if not pointer:
        return None
    if (library.get_options(pointer) != int(context.options)
            or library.get_verify_mode(pointer) != _openssl_verify_mode(context)):
        return None
    return pointer


def _openssl_verify_mode(context: ssl.SSLContext) -> int:
    """OpenSSL's flags for ``context.verify_mode`` (SSL_VERIFY_PEER 1,
    SSL_VERIFY_FAIL_IF_NO_PEER_CERT 2), as CPython's ``_ssl`` sets them."""
    return {ssl.CERT_NONE: 0, ssl.CERT_OPTIONAL: 1, ssl.CERT_REQUIRED: 3}[context.verify_mode]


def name_trusted_authorities(context: ssl.SSLContext, *, location: str | None = None,
                             pem: str | None = None) -> bool:
    """Have ``context`` (a server's, its verify mode set) name the subjects of the
    certificates in the trust store (a PEM file at ``location``, or ``pem`` text) when it asks
    for a client certificate. False (logged) when it cannot be done here."""
    library = _libssl()
    pointer = None if library is None else _ssl_ctx(library, context)
    if library is None or pointer is None:
        if library is not None:
            logger.warning("TLS listeners cannot name their trusted CAs to clients (this "
                           "Python's SSLContext layout is not the one expected)")
        return False
    if location is not None:
        names = library.load_names(os.fsencode(location))
    else:
        names = _names_from_text(library, pem or "")
    if not names:
        return False
    library.set_names(pointer, names)  # the context owns the list from now on
    return True


def _names_from_text(library: _LibSsl, pem: str) -> int | None:
    descriptor, path = tempfile.mkstemp(prefix="samsa-truststore-", suffix=".pem")
    try:
        with os.fdopen(descriptor, "w", encoding="ascii") as file:
            file.write(pem)
        result: int | None = library.load_names(os.fsencode(path))
        return result
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def named_authority_count(context: ssl.SSLContext) -> int:
    """How many CA names ``context`` sends in a certificate request (-1: unknown here)."""
    library = _libssl()
    pointer = None if library is None else _ssl_ctx(library, context)
    if library is None or pointer is None:
        return -1
    names = library.get_names(pointer)
    return library.count(names) if names else 0
