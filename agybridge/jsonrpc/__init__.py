"""JSON-RPC 2.0 over newline-delimited JSON on trio byte streams: the public face.

Other layers import from here only. `Peer` runs the connection and dispatches to a
`Handler`; handlers raise `RpcError` (named constructors per `ErrorCode`) to answer
with an error; `Peer.request` raises `PeerClosedError` when the peer is gone.
"""

from .errors import ErrorCode as ErrorCode
from .errors import PeerClosedError as PeerClosedError
from .errors import RpcError as RpcError
from .handler import Handler as Handler
from .handler import MessageContext as MessageContext
from .handler import RequestContext as RequestContext
from .messages import RequestId as RequestId
from .peer import Peer as Peer
from .peer import PeerStatistics as PeerStatistics
from .writer import NowaitSendStream as NowaitSendStream
from .writer import PipeSendStream as PipeSendStream
