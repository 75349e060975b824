"""A Python client for codeinterpd (docs/protocol.md, docs/client.md).

    from codeinterp import Client
    with Client("/run/codeinterp/codeinterp.sock") as c:
        r = c.execute("sum([9.0, 7.5]) / 2", summary="Northstar mean runtime")
        print(r.outcome, r.result.text)     # ok 8.25
        print(r.model_text())

Pure Python; needs only msgpack (Debian's python3-msgpack).
"""
from .client import Client, Invocation, KeepOutputs
from .connection import Connection, default_socket
from .errors import (Cancelled, ClientTimeout, CodeinterpError, ConnectFailed, ConnectionLost, InvalidInput, NotFound,
                     Overloaded, PermissionDenied, ProtocolError, QuotaExhausted, RequestNotEncodable, TransportError,
                     UnavailableSource, WorkerError)
from .records import (Artifact, CallState, Channel, Evidence, ExceptionInfo, ExitStatus, Hello, Histogram,
                      InvocationInfo, KeptOutput, Limits, PolicyInfo, ProducedBy, Progress, Result, Runtime, Source,
                      Status, Timing, WorkerErrorInfo)

__all__ = [
    "Client", "Invocation", "KeepOutputs", "Connection", "default_socket",
    "CodeinterpError", "InvalidInput", "UnavailableSource", "QuotaExhausted", "Overloaded", "NotFound",
    "PermissionDenied", "WorkerError", "Cancelled", "ProtocolError", "RequestNotEncodable", "TransportError",
    "ConnectFailed", "ConnectionLost", "ClientTimeout",
    "Artifact", "CallState", "Channel", "Evidence", "ExceptionInfo", "ExitStatus", "Hello", "Histogram",
    "InvocationInfo", "KeptOutput", "Limits",
    "PolicyInfo", "ProducedBy", "Progress", "Result", "Runtime", "Source", "Status", "Timing", "WorkerErrorInfo",
]
