"""Length-delimited protobuf frames, as Bazel's writeDelimitedTo/parseDelimitedFrom.

Each message is preceded by its size as a base-128 varint. Reads loop over short
reads, so a frame that arrives in pieces is reassembled; a stream that ends inside a
frame raises ``TruncatedFrame``; a size prefix that is not a valid varint, or that
announces more than ``MAX_FRAME`` bytes, raises ``MalformedFrame``.
"""

from __future__ import annotations

from typing import BinaryIO

# Bazel's own limit for a single message is 2 GiB; a request this large is far
# beyond any real flagfile, so anything above it is treated as a corrupt prefix.
MAX_FRAME = 1 << 30


class FrameError(Exception):
    """A malformed, truncated or oversized length-delimited frame."""


class TruncatedFrame(FrameError):
    """The stream ended in the middle of a frame."""


class MalformedFrame(FrameError):
    """The size prefix is not a usable varint."""


def _read_exact(stream: BinaryIO, n: int) -> bytes:
    chunks = []
    remaining = n
    while remaining:
        chunk = stream.read(remaining)
        if not chunk:
            raise TruncatedFrame(f"stream ended after {n - remaining} of {n} bytes")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def read_frame(stream: BinaryIO) -> bytes | None:
    """Returns the next frame's payload, or None at a clean end of stream."""
    shift = 0
    size = 0
    for i in range(10):
        byte = stream.read(1)
        if not byte:
            if i == 0:
                return None
            raise TruncatedFrame("stream ended inside a size prefix")
        b = byte[0]
        size |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
    else:
        raise MalformedFrame("size prefix longer than 10 bytes")
    if size > MAX_FRAME:
        raise MalformedFrame(f"frame of {size} bytes exceeds the {MAX_FRAME}-byte limit")
    return _read_exact(stream, size)


def encode_varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def write_frame(stream: BinaryIO, payload: bytes) -> None:
    stream.write(encode_varint(len(payload)) + payload)
    stream.flush()
