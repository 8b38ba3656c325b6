"""A handler's outcome as response bytes, with fallbacks so that a request is always answered.

Kafka's rule, which a client relies on: a request that the broker could read gets a response
valid at the request's version. A handler that raises, or whose response cannot be encoded at
that version (a field set that the version lacks, a value out of range), must not cost the
client its connection. So, in order, each step taken only when the one before failed:

1. the handler's response, encoded at the request's version;
2. the API's ``error_response`` for the request, reporting UNKNOWN_SERVER_ERROR (or the
   handler's own ``KafkaError``) for every part of it, as Kafka's ``getErrorResponse``; its
   top-level ``error_code`` is dropped at a version that lacks one (``fit_to_version``: an
   ``error_response`` is not told the version; Kafka's response constructors take it, e.g.
   ElectLeaders v0 reports errors per partition only);
3. the last resort: the response class's defaults, its top-level ``error_code`` (where the
   version has one) set to the error. Defaults are valid at every version by construction.

Every step that fails is logged with its traceback (a bug to fix, never the client's fault).
Pure functions of their arguments apart from the log: nothing here does I/O or keeps state.
"""

from __future__ import annotations

import copy
import logging

from broker.apis import ApiSpec, RequestContext, ResponsePart, ZeroCopyResponse
from protocol.codec import Message
from protocol.errors import KafkaError, UnknownServerError, UnsupportedVersionError
from protocol.frames import encode_response_message
from protocol.messages import RESPONSES, response_header_version

__all__ = ["encode_outcome", "failure_response", "fit_to_version", "last_resort_response",
           "response_parts"]

logger = logging.getLogger("samsa.broker.connection")  # the connection's failures, as before


def failure_response(spec: ApiSpec, context: RequestContext, request: Message,
                     error: Exception) -> Message:
    """The answer to ``request`` when its handler raised ``error`` (or refused the version):
    a ``KafkaError`` keeps its code; anything else is logged with its traceback and becomes
    UNKNOWN_SERVER_ERROR."""
    if not isinstance(error, KafkaError):
        logger.error("%s v%d from %s failed", spec.name, context.api_version,
                     context.connection_id, exc_info=error)
        error = UnknownServerError()
    try:
        return fit_to_version(spec.error_response(request, error), context.api_version)
    except Exception:
        logger.exception("%s v%d: building the error response failed", spec.name,
                         context.api_version)
        return last_resort_response(spec.api_key, context.api_version, error.code)


def response_parts(spec: ApiSpec, context: RequestContext, request: Message,
                   result: Message | ZeroCopyResponse) -> list[ResponsePart]:
    """``result`` encoded at the request's version, else the fallbacks in the module's order."""
    try:
        return encode_outcome(context, result)
    except Exception:
        logger.exception("cannot encode the %s v%d response to %s", spec.name,
                         context.api_version, context.connection_id)
    try:
        return encode_outcome(context, fit_to_version(
            spec.error_response(request, UnknownServerError()), context.api_version))
    except Exception:
        logger.exception("cannot encode the %s v%d error response either", spec.name,
                         context.api_version)
    last_resort = last_resort_response(spec.api_key, context.api_version,
                                       UnknownServerError.code)
    return encode_outcome(context, last_resort)


def encode_outcome(context: RequestContext, result: Message | ZeroCopyResponse) -> list[ResponsePart]:
    """The response frame (size, response header, body) at the request's version."""
    header = context.header
    header_version = response_header_version(header.request_api_key, context.api_version)
    if isinstance(result, ZeroCopyResponse):
        return result.frame_parts(header.correlation_id, header_version, context.api_version)
    return [encode_response_message(header.correlation_id, header_version, result,
                                    context.api_version)]


def fit_to_version(response: Message, version: int) -> Message:
    """``response`` without its top-level ``error_code`` if ``version`` lacks that field (the
    generated encoder refuses a non-default value there); else ``response`` itself."""
    if not getattr(response, "error_code", 0):
        return response
    try:
        response.encode(version)
    except UnsupportedVersionError:
        response = copy.copy(response)
        response.error_code = 0  # type: ignore[attr-defined]
    return response


def last_resort_response(api_key: int, version: int, error_code: int) -> Message:
    """The response class's defaults with ``error_code`` at the top level if ``version`` has
    that field (the generated encoder refuses a non-default value in a field a version lacks:
    that is how a version without one is told apart)."""
    response_class = RESPONSES[api_key]
    response = response_class()
    if hasattr(response, "error_code"):
        response.error_code = error_code
        try:
            response.encode(version)
        except UnsupportedVersionError:
            response = response_class()
    return response
