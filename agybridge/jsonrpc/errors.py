"""JSON-RPC 2.0 error codes and the exceptions of the jsonrpc layer.

Codes: JSON-RPC 2.0 §5.1 plus the ACP ones (ACP ``schema.json`` ``$defs/ErrorCode``;
acp/brief.md §1 says when to use which).
"""

from __future__ import annotations

import enum
from typing import Any


class ErrorCode(enum.IntEnum):
    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    AUTH_REQUIRED = -32000
    RESOURCE_NOT_FOUND = -32002
    REQUEST_CANCELLED = -32800


#: The catalogue ids (agybridge/causes.py) of the errors this layer answers by
#: itself, named in their ``data._meta.agybridge.cause`` like every other error
#: answer (tests/unit/test_causes.py checks the catalogue has them).
FRAMING_CAUSES = {
    ErrorCode.PARSE_ERROR: "invalid_json",
    ErrorCode.INVALID_REQUEST: "invalid_request",
}


def _naming_cause(code: ErrorCode, data: object) -> object:
    if data is not None and not isinstance(data, dict):
        return data
    meta = {"agybridge": {"cause": FRAMING_CAUSES[code]}}
    return {**(data or {}), "_meta": meta}


class RpcError(Exception):
    """A JSON-RPC error: raised by handlers to answer one, raised to callers on receipt.

    Attributes:
      code: the error code (usually an `ErrorCode`, but peers may send any integer).
      message: a short sentence for humans.
      data: extra JSON-serialisable detail (ACP clients show ``data["details"]``), or None.
    """

    def __init__(self, code: int, message: str, data: object = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def __str__(self) -> str:
        return f"{self.message} (JSON-RPC error {self.code})"

    def __repr__(self) -> str:
        return f"RpcError(code={self.code!r}, message={self.message!r}, data={self.data!r})"

    def to_wire(self) -> dict[str, Any]:
        """The JSON-RPC ``error`` object: ``data`` only when it is not None."""
        wire: dict[str, Any] = {"code": int(self.code), "message": self.message}
        if self.data is not None:
            wire["data"] = self.data
        return wire

    @classmethod
    def from_wire(cls, error: object) -> RpcError:
        """Build from a received ``error`` member; never fails, even on a malformed one."""
        if not isinstance(error, dict):
            return cls(ErrorCode.INTERNAL_ERROR, "malformed error response", {"error": error})
        code = error.get("code")
        message = error.get("message")
        if isinstance(code, bool) or not isinstance(code, int):
            code = ErrorCode.INTERNAL_ERROR
        if not isinstance(message, str):
            message = repr(message)
        return cls(code, message, error.get("data"))

    # Named constructors, one per code (attrs docs/init.md: "named constructors").

    @classmethod
    def parse_error(cls, message: str = "Parse error", data: object = None) -> RpcError:
        return cls(ErrorCode.PARSE_ERROR, message, _naming_cause(ErrorCode.PARSE_ERROR, data))

    @classmethod
    def invalid_request(cls, message: str = "Invalid request", data: object = None) -> RpcError:
        data = _naming_cause(ErrorCode.INVALID_REQUEST, data)
        return cls(ErrorCode.INVALID_REQUEST, message, data)

    @classmethod
    def method_not_found(cls, method: str, data: object = None) -> RpcError:
        return cls(ErrorCode.METHOD_NOT_FOUND, f"Method not found: {method!r}", data)

    @classmethod
    def invalid_params(cls, message: str = "Invalid params", data: object = None) -> RpcError:
        return cls(ErrorCode.INVALID_PARAMS, message, data)

    @classmethod
    def internal_error(cls, message: str = "Internal error", data: object = None) -> RpcError:
        return cls(ErrorCode.INTERNAL_ERROR, message, data)

    @classmethod
    def auth_required(
        cls, message: str = "Authentication required", data: object = None
    ) -> RpcError:
        return cls(ErrorCode.AUTH_REQUIRED, message, data)

    @classmethod
    def resource_not_found(
        cls, message: str = "Resource not found", data: object = None
    ) -> RpcError:
        return cls(ErrorCode.RESOURCE_NOT_FOUND, message, data)

    @classmethod
    def request_cancelled(cls, message: str = "Request cancelled", data: object = None) -> RpcError:
        return cls(ErrorCode.REQUEST_CANCELLED, message, data)


class PeerClosedError(Exception):
    """The peer is gone (its stream ended or broke): an outgoing request cannot complete."""
