"""Stream a Chrome/Kineto trace file: top-level keys one by one, `traceEvents` in batches of parsed events.

A trace of 1 GB never sits in memory as Python objects: the file is read (and gunzipped) in chunks, the event
array is cut at event boundaries and each batch is parsed at C speed (orjson).

Cutting: the last `},` in the buffer is a candidate boundary. Parsing `[` + text up to it + `]` succeeds only when
the cut is a real top-level boundary (a cut inside an event or a string leaves the array unbalanced), so a wrong
guess is detected, never silently wrong; then that stretch is parsed one event at a time with raw_decode.

A file that ends early (truncated JSON or gzip) yields every complete event before the break and reports it in
`Stream.truncated`; what comes after an unparseable stretch is dropped and reported the same way.
"""
from __future__ import annotations

import codecs
import json
import re
import zlib

import orjson

CHUNK_CHARS = 8 << 20          # read size; a batch of events is at most about this big
MAX_VALUE_CHARS = 64 << 20     # one event or metadata value larger than this is treated as corrupt
_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
GZIP_MAGIC = b"\x1f\x8b"


class TraceFormatError(Exception):
    """The file is not a JSON object trace (empty, not JSON, not an object). Message is one line for the user."""


class _Reader:
    """Text chunks from a plain or gzip file. gzip is inflated here (not GzipFile) so that a stream cut short or
    damaged still yields everything before the break; then `broken` says why it stopped."""

    RAW_CHUNK = 1 << 20

    def __init__(self, path):
        self._raw = open(path, "rb")
        self.gzipped = self._raw.read(2) == GZIP_MAGIC
        self._raw.seek(0)
        self._z = zlib.decompressobj(wbits=31) if self.gzipped else None
        self._dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.broken = ""
        self.eof = False
        self.bytes_read = 0

    def _inflate(self) -> bytes:
        out = []
        size = 0
        while size < CHUNK_CHARS:
            comp = self._raw.read(self.RAW_CHUNK)
            if not comp:
                if not self._z.eof and not self.broken:
                    self.broken = "compressed stream ends early (gzip file truncated)"
                break
            try:
                data = self._z.decompress(comp)
                while self._z.eof and self._z.unused_data:   # concatenated gzip members
                    rest = self._z.unused_data
                    self._z = zlib.decompressobj(wbits=31)
                    data += self._z.decompress(rest)
            except zlib.error as e:
                self.broken = f"compressed stream is damaged ({e})"
                self._raw.seek(0, 2)
                break
            out.append(data)
            size += len(data)
        return b"".join(out)

    def read(self) -> str:
        if self.eof:
            return ""
        try:
            data = self._inflate() if self._z is not None else self._raw.read(CHUNK_CHARS)
        except OSError as e:
            self.broken = f"read error ({e})"
            data = b""
        self.bytes_read += len(data)
        if not data:
            self.eof = True
            return self._dec.decode(b"", final=True)
        return self._dec.decode(data)

    def close(self) -> None:
        self._raw.close()


class Stream:
    """Iterate a trace file. `for kind, payload in Stream(path)`: ("meta", (key, value)) or ("events", list)."""

    def __init__(self, path, parse=None):
        self.path = path
        self._parse = parse or orjson.loads   # text of a JSON array of events -> list; ValueError when not valid JSON
        self.truncated = ""       # why the readable part ends early; "" when the file is complete
        self.saw_events_key = False
        self.gzipped = False
        self._buf = ""
        self._pos = 0
        self._r: _Reader | None = None

    # -- buffer ---------------------------------------------------------------------------------------
    def _more(self) -> bool:
        """Append a chunk; drop consumed text. False at end of input."""
        chunk = self._r.read()
        if self._pos:
            self._buf = self._buf[self._pos:]
            self._pos = 0
        if not chunk:
            return False
        self._buf += chunk
        return True

    def _skip_ws(self) -> bool:
        """Move past whitespace, reading more as needed; False when input ends."""
        while True:
            self._pos = _WS.match(self._buf, self._pos).end()
            if self._pos < len(self._buf):
                return True
            if not self._more():
                return False

    def _decode_value(self):
        """One complete JSON value at the cursor (reads more until it parses); raises on end of input/corrupt."""
        if not self._skip_ws():
            raise EOFError
        while True:
            try:
                value, end = _DECODER.raw_decode(self._buf, self._pos)
                self._pos = end
                return value
            except ValueError:
                if len(self._buf) - self._pos > MAX_VALUE_CHARS or not self._more():
                    raise

    def _expect(self, chars: str) -> str:
        if not self._skip_ws():
            raise EOFError
        c = self._buf[self._pos]
        if c not in chars:
            raise ValueError(f"expected one of {chars!r}, found {c!r}")
        self._pos += 1
        return c

    # -- top level ------------------------------------------------------------------------------------
    def __iter__(self):
        self._r = _Reader(self.path)
        self.gzipped = self._r.gzipped
        try:
            yield from self._top_level()
        finally:
            self._r.close()

    def _top_level(self):
        if not self._skip_ws():
            raise TraceFormatError(self._r.broken or "empty file")
        first = self._buf[self._pos]
        if first != "{":
            what = "a JSON array" if first == "[" else "not JSON"
            raise TraceFormatError(f"{what}, not a PyTorch profiler trace (expected an object with traceEvents)")
        self._pos += 1
        try:
            while True:
                if not self._skip_ws():
                    raise EOFError
                if self._buf[self._pos] == "}":
                    return
                key = self._decode_value()
                if not isinstance(key, str):
                    raise ValueError("object key is not a string")
                self._expect(":")
                if key == "traceEvents":
                    self.saw_events_key = True
                    if not self._skip_ws():
                        raise EOFError
                    if self._buf[self._pos] == "[":
                        self._pos += 1
                        yield from self._events()
                    else:
                        yield "meta", (key, self._decode_value())
                else:
                    yield "meta", (key, self._decode_value())
                if self._expect(",}") == "}":
                    return
        except EOFError:
            self.truncated = self._r.broken or "the JSON ends early (file truncated)"
        except ValueError as e:
            if self._r.eof:
                self.truncated = self._r.broken or f"the JSON ends early (file truncated: {e})"
            else:
                self.truncated = self._r.broken or f"unparseable JSON after {self._where()} ({e})"

    def _where(self) -> str:
        return f"{self._r.bytes_read / 2**20:.1f} MiB"

    # -- the event array --------------------------------------------------------------------------------
    def _events(self):
        while True:
            if not self._skip_ws():
                raise EOFError
            if self._buf[self._pos] == "]":
                self._pos += 1
                return
            cut = self._buf.rfind("},", self._pos)
            if cut > self._pos:
                try:
                    batch = self._parse("[" + self._buf[self._pos:cut + 1] + "]")
                except ValueError:   # orjson.JSONDecodeError is one
                    batch = None
                if batch is not None:
                    self._pos = cut + 2
                    yield "events", batch
                    if len(self._buf) - self._pos < CHUNK_CHARS // 2:
                        self._more()
                    continue
            done, batch = self._events_one_by_one()
            if batch:
                yield "events", batch
            if done:
                return

    def _events_one_by_one(self) -> tuple[bool, list]:
        """Slow path: events one at a time until the buffer needs refilling or the array ends."""
        out = []
        budget = CHUNK_CHARS
        start = self._pos
        while self._pos - start < budget:
            if not self._skip_ws():
                if out:
                    return False, out
                raise EOFError
            c = self._buf[self._pos]
            if c == "]":
                self._pos += 1
                return True, out
            if c == ",":
                self._pos += 1
                continue
            try:
                value, end = _DECODER.raw_decode(self._buf, self._pos)
            except ValueError:
                if out:  # hand over what we have; the next call reads more before retrying
                    return False, out
                if len(self._buf) - self._pos > MAX_VALUE_CHARS:
                    raise
                if not self._more():
                    raise
                start = self._pos
                continue
            out.append(value)
            self._pos = end
        return False, out
