"""How phases.bin's chunks are framed and found again (haiprof/phasestore.py says what a chunk holds).

    b"HPC1" | u32 header bytes | u32 payload bytes | u32 crc32(header + payload) | header | payload

A chunk is read only when it checks out: its magic, lengths that end inside the file, its CRC, and a header whose
counts its payload can hold. Bytes that do not (a last chunk cut short by a kill, a damaged or forged chunk
anywhere) are stepped over to the next magic that starts a chunk that checks out, so one bad chunk costs its own
records only, and a forged length never sizes a read or an array.
"""
from __future__ import annotations

import json
import os
import struct
import zlib

MAGIC = b"HPC1"
HEAD = struct.Struct("<4sIII")
MAX_INFLATE = 1032   # deflate's largest expansion: a header announcing more than its payload can hold is false
_BLOCK = 1 << 20


def row_bytes(n: int, nx: int) -> int:
    """The uncompressed payload of n rows with nx extras: name u8, start i64, dur i64, nx u8; x i64 each."""
    return 18 * n + 8 * nx


def header_ok(header, plen: int) -> bool:
    """A header whose counts can be trusted to size arrays: integers its payload of plen bytes can hold."""
    try:
        n, nx = header["n"], header["nx"]
        ok = (type(n) is int and type(nx) is int and n >= 0 and nx >= 0 and type(header["base"]) is int
              and type(header["names"]) is list and type(header["extra"]) is list)
    except (KeyError, TypeError):
        return False
    return ok and row_bytes(n, nx) <= MAX_INFLATE * plen + 64


class Skipped(int):
    """Bytes of phases.bin that held no readable chunk (as an int: all of them): `tail` of them at the end (a
    chunk cut short by a kill), `middle` in `places` spans before it (damaged chunks; those after are read)."""

    def __new__(cls, tail: int = 0, middle: int = 0, places: int = 0):
        self = super().__new__(cls, tail + middle)
        self.tail, self.middle, self.places = tail, middle, places
        return self

    @classmethod
    def of(cls, spans: list, size: int) -> "Skipped":
        """From (offset, bytes) spans of a file of `size` bytes."""
        tail = spans[-1][1] if spans and sum(spans[-1]) >= size else 0
        middle = spans[:-1] if tail else spans
        return cls(tail, sum(n for _, n in middle), len(middle))


def _chunk_at(f, offset: int, size: int):
    """(header, payload, bytes) of the chunk at `offset` if it checks out, else None."""
    f.seek(offset)
    head = f.read(HEAD.size)
    if len(head) < HEAD.size:
        return None
    magic, hlen, plen, crc = HEAD.unpack(head)
    end = offset + HEAD.size + hlen + plen
    if magic != MAGIC or end > size:   # a length past the file's end is never read
        return None
    body = f.read(hlen + plen)
    if len(body) < hlen + plen or zlib.crc32(body) != crc:
        return None
    try:
        header = json.loads(body[:hlen])
    except ValueError:
        return None
    return (header, body[hlen:], end - offset) if header_ok(header, plen) else None


def _next_magic(f, offset: int, size: int) -> int:
    """Where MAGIC next appears from `offset` on (`size` if nowhere)."""
    while offset < size:
        f.seek(offset)
        block = f.read(min(_BLOCK, size - offset))
        at = block.find(MAGIC)
        if at >= 0:
            return offset + at
        if len(block) < len(MAGIC):
            break
        offset += len(block) - len(MAGIC) + 1
    return size


def file_size(path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def whole_chunks(path, size: int | None = None, skipped: list | None = None):
    """(header, payload, bytes, offset) of every chunk that checks out, in order, among the first `size` bytes (all of
    the file as it is now without one), read a chunk at a time; `skipped` gets (offset, bytes) of each span that
    held none."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return
    with f:
        size = os.fstat(f.fileno()).st_size if size is None else size
        offset = 0
        while offset < size:
            got = _chunk_at(f, offset, size)
            if got is None:
                after = _next_magic(f, offset + 1, size)
                if skipped is not None:
                    skipped.append((offset, after - offset))
                offset = after
                continue
            yield (*got, offset)
            offset += got[2]
