"""LSP base-protocol framing with bounded memory, and the JSON-RPC checks of a message.

pygls's own stdio loop reads whatever length a `Content-Length` header names (one
header of 99 TB was a MemoryError that ended the server) and drops a message whose
params do not fit its type without answering. `FrameReader` reads frames of at most
`MAX_MESSAGE_BYTES`; `envelope` says what is wrong with a parsed message before pygls
sees it. The server (server.py) answers each `Refusal` per JSON-RPC.

After a bad frame the reader resynchronises at the next `Content-Length: N\\r\\n`: that
byte sequence cannot occur inside a JSON body (a raw CR is not allowed in a JSON
string, and the name is not a JSON token), so an honest oversized body is skipped
whole and a lying header loses only the bytes up to the next frame.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import BinaryIO

# A 5 MB document's didOpen fits a dozen times; a frame beyond this is refused unread.
MAX_MESSAGE_BYTES = 64 * 2**20
MAX_HEADER_BYTES = 8192  # all header lines of one frame together
CHUNK = 1 << 16

# JSON-RPC 2.0 and LSP error codes.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_NOT_INITIALIZED = -32002

_FRAME_START = re.compile(rb"Content-Length: *\d+\r\n", re.I)
_RESYNC_TAIL = 64  # bytes kept between chunks while resynchronising: a header split by a read


@dataclass(frozen=True)
class Refusal:
    """A message answered with a JSON-RPC error instead of being handled."""

    code: int
    message: str
    msg_id: int | str | None = None


class FrameReader:
    """Reads LSP frames (headers, blank line, body) from a binary stream."""

    def __init__(self, stream: BinaryIO):
        self.stream = stream
        self.buf = bytearray()
        self.lost = False  # a refused frame's end is unknown: resynchronise first

    def _fill(self) -> bool:
        read = getattr(self.stream, "read1", self.stream.read)
        data = read(CHUNK)
        self.buf += data
        return bool(data)

    def _headers(self) -> list[bytes] | Refusal | None:
        """The header lines of one frame, without the blank line; None at end of input."""
        lines: list[bytes] = []
        size = 0
        while True:
            i = self.buf.find(b"\n")
            if i < 0:
                if len(self.buf) + size > MAX_HEADER_BYTES:
                    return Refusal(
                        PARSE_ERROR, f"Parse error: a header over {MAX_HEADER_BYTES} bytes"
                    )
                if not self._fill():
                    return None
                continue
            line = bytes(self.buf[: i + 1])
            del self.buf[: i + 1]
            size += len(line)
            if line.strip() == b"":
                if lines:
                    return lines
                continue  # blank lines between frames are tolerated
            lines.append(line.rstrip(b"\r\n"))
            if size > MAX_HEADER_BYTES:
                return Refusal(PARSE_ERROR, f"Parse error: headers over {MAX_HEADER_BYTES} bytes")

    def _body(self, n: int) -> bytes | None:
        while len(self.buf) < n:
            if not self._fill():
                return None
        body = bytes(self.buf[:n])
        del self.buf[:n]
        return body

    def resync(self) -> bool:
        """Discard input up to the next frame's `Content-Length` header; False at end."""
        while True:
            m = _FRAME_START.search(self.buf)
            if m:
                del self.buf[: m.start()]
                return True
            del self.buf[: max(0, len(self.buf) - _RESYNC_TAIL)]
            if not self._fill():
                return False

    def frame(self) -> bytes | Refusal | None:
        """The next frame's body, a Refusal for a frame that cannot be read, or None at
        end of input. After a Refusal the next call first resynchronises: not before,
        because the client may wait for the refusal before it sends the next frame."""
        if self.lost:
            self.lost = False
            if not self.resync():
                return None
        headers = self._headers()
        if headers is None:
            return None
        length = headers if isinstance(headers, Refusal) else _length(headers)
        if isinstance(length, Refusal):
            self.lost = True
            return length
        return self._body(length)  # None: input ended inside the body


def _length(headers: list[bytes]) -> int | Refusal:
    """The body length the headers declare, or why they are refused."""
    length = None
    for line in headers:
        name, colon, value = line.partition(b":")
        if not colon:
            shown = line[:40].decode("ascii", "replace")
            return Refusal(PARSE_ERROR, f"Parse error: `{shown}` is not a header line")
        if name.strip().lower() == b"content-length":
            value = value.strip()
            if not value.isdigit():
                shown = value[:40].decode("ascii", "replace")
                return Refusal(PARSE_ERROR, f"Parse error: Content-Length `{shown}` is no length")
            # more digits than any allowed length has: too big (and no int() of 8 000 digits)
            length = int(value) if len(value) <= 12 else MAX_MESSAGE_BYTES + 1
            if length > MAX_MESSAGE_BYTES:
                shown = value.decode() if len(value) <= 20 else f"{value[:20].decode()}..."
                return Refusal(
                    INVALID_REQUEST,
                    f"Invalid Request: a message of {shown} bytes is over the server's limit "
                    f"of {MAX_MESSAGE_BYTES} bytes; it was skipped",
                )
    if length is None:
        return Refusal(PARSE_ERROR, "Parse error: a frame without a Content-Length header")
    return length


def valid_id(x) -> bool:
    return (isinstance(x, int) and not isinstance(x, bool)) or isinstance(x, str)


def envelope(data) -> Refusal | None:
    """What makes a parsed message no JSON-RPC 2.0 request, notification or response."""
    if not isinstance(data, dict):
        what = "a batch (LSP has none)" if isinstance(data, list) else "not an object"
        return Refusal(INVALID_REQUEST, f"Invalid Request: the message is {what}")
    has_id = "id" in data
    msg_id = data.get("id")
    if has_id and not valid_id(msg_id) and not (msg_id is None and "method" not in data):
        return Refusal(INVALID_REQUEST, "Invalid Request: `id` must be an integer or a string")
    if data.get("jsonrpc") != "2.0":
        return Refusal(INVALID_REQUEST, 'Invalid Request: `jsonrpc` must be "2.0"', msg_id)
    if "method" in data:
        if not isinstance(data["method"], str):
            return Refusal(INVALID_REQUEST, "Invalid Request: `method` must be a string", msg_id)
        params = data.get("params")
        if params is not None and not isinstance(params, (dict, list)):
            return Refusal(
                INVALID_PARAMS,
                f"Invalid params for {data['method']}: params must be an object or an array",
                msg_id,
            )
    elif not has_id or ("result" not in data and "error" not in data):
        return Refusal(
            INVALID_REQUEST,
            "Invalid Request: neither a method nor a response",
            msg_id if valid_id(msg_id) else None,
        )
    return None
