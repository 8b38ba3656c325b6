"""The subject of an X.509 certificate as an RFC 2253 distinguished name, the way Java's
``X500Principal.getName()`` prints it — the string Kafka's ``ssl.principal.mapping.rules`` see.

Input: the certificate's DER bytes (``SSLObject.getpeercert(binary_form=True)``), read with a
minimal DER reader (definite lengths, single-byte tags: all X.509 needs here)::

    Certificate ::= SEQUENCE { tbsCertificate SEQUENCE { [0] version OPTIONAL, serialNumber,
                               signature, issuer Name, validity, subject Name, ... }, ... }
    Name ::= SEQUENCE OF SET OF SEQUENCE { type OBJECT IDENTIFIER, value ANY }

Output rules (Java's ``X500Name``/``AVA.toRFC2253String``):
- RDNs last to first (RFC 2253 reverses the certificate's order), joined by ``,``; the values
  of a multi-valued RDN joined by ``+`` in certificate order.
- The keywords CN, C, L, ST, O, OU, STREET, DC and UID (RFC 2253's); any other type as its
  dotted OID. A keyword's string value is written with ``, = + < > # ; " \\`` escaped by a
  backslash, a NUL as ``\\00``, and leading/trailing spaces (and CRs) escaped; a dotted OID, or a
  value that is not a string, is ``#`` and the hex of the value's DER encoding.

Pure functions; ``CertificateError`` for bytes that are not a certificate.
"""

from __future__ import annotations

__all__ = ["CertificateError", "subject_distinguished_name"]

_SEQUENCE, _SET, _OID = 0x30, 0x31, 0x06
_EXPLICIT_VERSION = 0xA0
# The RFC 2253 keywords Java prints (its other keywords, EMAILADDRESS among them, are not
# RFC 2253's and are printed as OIDs).
_KEYWORDS = {
    "2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O",
    "2.5.4.11": "OU", "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
_STRING_CODECS = {  # DER string tags -> how their bytes decode
    0x0C: "utf-8", 0x13: "latin-1", 0x14: "latin-1", 0x16: "latin-1", 0x1B: "latin-1",
    0x1E: "utf-16-be", 0x1C: "utf-32-be",
}
_ESCAPED = ',=+<>#;"\\'


class CertificateError(ValueError):
    """The bytes are not a DER certificate this reader understands."""


def subject_distinguished_name(der: bytes) -> str:
    """The certificate's subject, as Java's ``X500Principal.getName()`` (RFC 2253)."""
    certificate = _children(_only(der, 0, _SEQUENCE), der)
    tbs_start, tbs_end = _content(der, certificate[0][0], _SEQUENCE)
    fields = _children((tbs_start, tbs_end), der)
    if fields and der[fields[0][0]] == _EXPLICIT_VERSION:
        fields = fields[1:]
    if len(fields) < 5:
        raise CertificateError("the certificate has no subject")
    subject = _children(_content(der, fields[4][0], _SEQUENCE), der)
    rdns = [_rdn(der, start) for start, _ in subject]
    return ",".join(reversed(rdns))


def _rdn(der: bytes, start: int) -> str:
    return "+".join(_attribute(der, position) for position, _ in
                    _children(_content(der, start, _SET), der))


def _attribute(der: bytes, start: int) -> str:
    (oid_start, _), (value_start, value_end) = _children(_content(der, start, _SEQUENCE), der)[:2]
    oid = _oid(der[slice(*_content(der, oid_start, _OID))])
    keyword = _KEYWORDS.get(oid)
    codec = _STRING_CODECS.get(der[value_start])
    if keyword is None or codec is None:
        return f"{oid}=#{der[value_start:value_end].hex()}"
    content_start, content_end = _content(der, value_start, der[value_start])
    return f"{keyword}={_escape(der[content_start:content_end].decode(codec, 'replace'))}"


def _escape(value: str) -> str:
    escaped = "".join("\\00" if c == "\0" else "\\" + c if c in _ESCAPED else c for c in value)
    lead = len(escaped) - len(escaped.lstrip(" \r"))
    trail = len(escaped.rstrip(" \r"))
    if lead == len(escaped):  # all blanks: each one escaped once
        return "".join("\\" + c for c in escaped)
    return ("".join("\\" + c for c in escaped[:lead]) + escaped[lead:trail]
            + "".join("\\" + c for c in escaped[trail:]))


def _oid(content: bytes) -> str:
    if not content:
        raise CertificateError("an empty object identifier")
    arcs: list[int] = []
    value = 0
    for byte in content:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    first = arcs[0]
    head = [min(first // 40, 2), first - 40 * min(first // 40, 2)]
    return ".".join(map(str, head + arcs[1:]))


# -- a minimal DER reader: positions into the bytes, no copies --------------------------------


def _header(der: bytes, start: int) -> tuple[int, int]:
    """(content start, content end) of the element at ``start``."""
    if start + 2 > len(der):
        raise CertificateError(f"truncated at byte {start}")
    first = der[start + 1]
    if first < 0x80:
        content, length = start + 2, first
    else:
        count = first & 0x7F
        if count == 0 or count > 4 or start + 2 + count > len(der):
            raise CertificateError(f"unsupported length at byte {start}")
        content, length = start + 2 + count, int.from_bytes(der[start + 2:start + 2 + count], "big")
    if content + length > len(der):
        raise CertificateError(f"an element at byte {start} runs past the end")
    return content, content + length


def _content(der: bytes, start: int, tag: int) -> tuple[int, int]:
    if der[start] != tag:
        raise CertificateError(f"expected tag 0x{tag:02x} at byte {start}, found 0x{der[start]:02x}")
    return _header(der, start)


def _only(der: bytes, start: int, tag: int) -> tuple[int, int]:
    if not der:
        raise CertificateError("no bytes")
    return _content(der, start, tag)


def _children(span: tuple[int, int], der: bytes) -> list[tuple[int, int]]:
    """The elements inside ``span``: each one's (start, end) including its header."""
    position, end = span
    children: list[tuple[int, int]] = []
    while position < end:
        _, child_end = _header(der, position)
        children.append((position, child_end))
        position = child_end
    return children
