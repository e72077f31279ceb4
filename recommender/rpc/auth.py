"""Admin access: a bearer token on every call to the Admin service, when one is configured.

The runner's calls (`Recommender`), gRPC health and reflection never need a token. The token is
compared in constant time and never logged; a refused call writes one access line with its
method and `UNAUTHENTICATED`, like every other call.
"""

from __future__ import annotations

import hmac
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc

if TYPE_CHECKING:  # generic in the stubs only
    _Interceptor = grpc.ServerInterceptor[Any, Any]
else:
    _Interceptor = grpc.ServerInterceptor

ADMIN_PREFIX = "/intelliscale.recommender.v1.Admin/"
TOKEN_ENV = "RECOMMENDER_ADMIN_TOKEN"
TOKEN_FILE_ENV = "RECOMMENDER_ADMIN_TOKEN_FILE"

access_log = logging.getLogger("recommender.access")


class AuthConfigError(ValueError):
    """The admin token could not be read, or is empty."""


def _from_file(path: str) -> str:
    try:
        token = Path(path).read_text().strip()
    except OSError as e:
        raise AuthConfigError(f"{path}: cannot read the admin token file: {e.strerror}") from e
    if not token:
        raise AuthConfigError(f"{path}: the admin token file is empty")
    return token


def resolve_admin_token(token: str | None = None, token_file: str | None = None,
                        environ: dict[str, str] | None = None) -> str | None:
    """The configured token, or None when Admin calls are open.

    Options beat the environment; a file (a Kubernetes secret mounted as a volume) beats a
    value. Surrounding whitespace is stripped: secret files often end with a newline.
    """
    env = dict(os.environ) if environ is None else environ
    if token_file:
        return _from_file(token_file)
    if token is not None and token.strip():
        return token.strip()
    if env.get(TOKEN_FILE_ENV):
        return _from_file(env[TOKEN_FILE_ENV])
    value = env.get(TOKEN_ENV, "").strip()
    return value or None


def bearer_matches(metadata: Any, token: bytes) -> bool:
    """True when the `authorization` metadata is `Bearer <token>` (scheme case-insensitive)."""
    for key, value in metadata or ():
        if key != "authorization":
            continue
        raw = value.encode() if isinstance(value, str) else bytes(value)
        scheme, _, given = raw.strip().partition(b" ")
        if scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), token):
            return True
    return False


def _refuse(method: str) -> Callable[[Any, grpc.ServicerContext], Any]:
    def refuse(_request: Any, context: grpc.ServicerContext) -> Any:
        name = method.rsplit("/", 1)[-1]
        access_log.info("%s UNAUTHENTICATED", name,
                        extra={"method": name, "code": "UNAUTHENTICATED"})
        context.abort(grpc.StatusCode.UNAUTHENTICATED,
                      "Admin calls need metadata 'authorization: Bearer <admin token>'")

    return refuse


class AdminTokenInterceptor(_Interceptor):
    """Refuses Admin calls without the right bearer token with UNAUTHENTICATED."""

    def __init__(self, token: str) -> None:
        if not token:
            raise AuthConfigError("the admin token must not be empty")
        self._token = token.encode()

    def __repr__(self) -> str:  # never show the token, even in a debugger or a traceback
        return "AdminTokenInterceptor(token=<redacted>)"

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler[Any, Any] | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        method = handler_call_details.method
        if not method.startswith(ADMIN_PREFIX):
            return continuation(handler_call_details)
        if bearer_matches(handler_call_details.invocation_metadata, self._token):
            return continuation(handler_call_details)
        handler = continuation(handler_call_details)
        if handler is None:
            return None  # unknown method: UNIMPLEMENTED, as without the interceptor
        refuse = _refuse(method)
        if handler.request_streaming and handler.response_streaming:
            return grpc.stream_stream_rpc_method_handler(
                refuse, handler.request_deserializer, handler.response_serializer)
        if handler.request_streaming:
            return grpc.stream_unary_rpc_method_handler(
                refuse, handler.request_deserializer, handler.response_serializer)
        if handler.response_streaming:
            return grpc.unary_stream_rpc_method_handler(
                refuse, handler.request_deserializer, handler.response_serializer)
        return grpc.unary_unary_rpc_method_handler(
            refuse, handler.request_deserializer, handler.response_serializer)
