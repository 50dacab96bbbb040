"""phases.bin: the phase records of a run in compressed columnar chunks, a few bytes per record.

A multi-day run writes millions of steps; as JSON lines that is ~250 bytes a step and a formatting cost on the flush
thread that holds the GIL the training thread needs. Here every flush appends one chunk:

    b"HPC1" | u32 header bytes | u32 payload bytes | u32 crc32(header + payload) | header | payload

    header  JSON: {"n": rows, "names": [...], "base": first start ns, "extra": [[row, record], ...]}
    payload zlib of the columns, each int64 column byte-shuffled (byte k of every value together) so that the
            small, similar numbers compress well:
              name  u8   index into the chunk's names
              start i64  start - previous start (the first: start - base)
              dur   i64  end - start
              nx    u8   how many integer extras the record has (0..MAX_EXTRAS)
              x     i64  the extras of the rows that have them, row after row

A record is (name: str, start: int, end: int, *extras: int). Anything else (a dict of DDP timers, a name past the
256th of a chunk, an integer beyond int64) travels as JSON in the header's "extra" with its row, so the order of
records is kept exactly. Chunks are independent: a kill mid-write leaves a torn last chunk, which the reader drops
(its CRC or its length says so); a damaged chunk anywhere costs its own records only (haiprof/phaseframes.py).
"""
from __future__ import annotations

import json
import zlib
from collections import Counter
from pathlib import Path

import numpy as np

from .phaseframes import HEAD, MAGIC, Skipped, file_size, row_bytes, whole_chunks

MAX_EXTRAS = 4
MAX_NAMES = 255
LEVEL = 6
_I64 = (-(2 ** 63), 2 ** 63 - 1)


def _shuffle(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a.astype("<i8").view(np.uint8).reshape(-1, 8).T).tobytes()


def _unshuffle(b: bytes, n: int) -> np.ndarray:
    planes = np.frombuffer(b, dtype=np.uint8, count=8 * n).reshape(8, n)
    out = np.empty((n, 8), dtype=np.uint8)
    for k in range(8):   # a byte plane at a time: a transposed copy (.T.copy()) goes byte by byte, ~2x slower
        out[:, k] = planes[k]
    return out.view("<i8").reshape(n)


def _plain(rec, strict: bool = False) -> bool:
    """A record the columns hold: (str, int, int, up to MAX_EXTRAS more ints). The int64 range is checked only
    when `strict` (encode_chunk retries a chunk strictly if numpy finds an integer out of range)."""
    t = type(rec)
    if t is tuple and len(rec) == 3 and not strict:   # most records: one branch, then three type checks
        return type(rec[0]) is str and type(rec[1]) is int and type(rec[2]) is int
    if t not in (tuple, list) or not 3 <= len(rec) <= 3 + MAX_EXTRAS or type(rec[0]) is not str:
        return False
    return all(type(v) is int and (not strict or _I64[0] <= v <= _I64[1]) for v in rec[1:])


def encode_chunk(records: list) -> bytes:
    """One chunk holding `records` in order (b"" for none)."""
    if not records:
        return b""
    try:
        return _encode(records, strict=False)
    except OverflowError:   # an integer beyond int64: that record goes to the JSON part
        return _encode(records, strict=True)


def _encode(records: list, strict: bool) -> bytes:
    names: dict = {}
    rows, extra = [], []
    for i, rec in enumerate(records):
        if _plain(rec, strict) and (rec[0] in names or len(names) < MAX_NAMES):
            rows.append(rec)
            if rec[0] not in names:
                names[rec[0]] = len(names)
        else:
            extra.append([i, list(rec) if isinstance(rec, tuple) else rec])
    n = len(rows)
    label, start, end = (list(c) for c in zip(*[r[:3] for r in rows])) if n else ([], [], [])
    name = np.array([names[x] for x in label], dtype=np.uint8)
    start = np.array(start, dtype=np.int64)
    end = np.array(end, dtype=np.int64)
    wide = [r for r in rows if len(r) > 3]
    if wide:
        nx = np.array([len(r) - 3 for r in rows], dtype=np.uint8)
        xs = np.array([v for r in wide for v in r[3:]], dtype=np.int64)
    else:
        nx, xs = np.zeros(n, dtype=np.uint8), np.zeros(0, dtype=np.int64)
    base = int(start[0]) if n else 0
    delta = np.diff(start, prepend=base)
    payload = zlib.compress(name.tobytes() + _shuffle(delta) + _shuffle(end - start) + nx.tobytes() + _shuffle(xs),
                            LEVEL)
    # marks counted per chunk, so a reader that only counts steps (the live status line) needs the headers alone
    marks = {k: v for k, v in Counter(label).items() if k.startswith("@")}
    header = json.dumps({"n": n, "names": list(names), "base": base, "nx": int(len(xs)), "marks": marks,
                         "extra": extra}, separators=(",", ":"), default=str).encode()
    crc = zlib.crc32(header + payload)
    return HEAD.pack(MAGIC, len(header), len(payload), crc) + header + payload


def decode_arrays(header: dict, payload: bytes) -> tuple:
    """The chunk's column rows as numpy arrays (name code, start, end, extras count, extras), without the
    header's "extra" records: (name u8, start i64, end i64, nx u8, xs i64)."""
    n = header["n"]
    expected = row_bytes(n, header["nx"])
    raw = zlib.decompressobj().decompress(payload, expected + 1)   # a payload never inflates past its header's
    if len(raw) != expected:
        raise ValueError(f"the payload holds {len(raw)} bytes, its header announces {expected}")
    o = 0
    name = np.frombuffer(raw, dtype=np.uint8, count=n, offset=o)
    o += n
    start = np.cumsum(_unshuffle(raw[o:o + 8 * n], n)) + header["base"] if n else np.zeros(0, np.int64)
    o += 8 * n
    dur = _unshuffle(raw[o:o + 8 * n], n)
    o += 8 * n
    nx = np.frombuffer(raw, dtype=np.uint8, count=n, offset=o)
    o += n
    xs = _unshuffle(raw[o:], header["nx"]) if header["nx"] else np.zeros(0, np.int64)
    if int(nx.sum()) != header["nx"]:
        raise ValueError("the rows' extras do not add up to the header's")
    return name, start, start + dur, nx, xs


def decode_chunk(header: dict, payload: bytes) -> list:
    """The chunk's records, in their original order, as lists."""
    names = header["names"]
    name, start, end, nx, xs = decode_arrays(header, payload)
    xs = xs.tolist()
    end = end.tolist()
    start = start.tolist()
    label = [names[i] for i in name.tolist()]
    rows, k = [], 0
    for i, c in enumerate(nx.tolist()):
        if c:
            rows.append([label[i], start[i], end[i], *xs[k:k + c]])
            k += c
        else:
            rows.append([label[i], start[i], end[i]])
    for i, rec in header["extra"]:
        rows.insert(i, rec)
    return rows


def read_chunks(path: Path) -> tuple[list, Skipped]:
    """(records, skipped): every readable chunk's records in order; `skipped` (phaseframes.Skipped, an int) counts
    the bytes that held none: a trailing chunk cut short (killed mid-write), or damaged chunks anywhere."""
    cols, skipped = read_columns(path)
    return cols.records(), skipped


def read_columns(path: Path) -> tuple["PhaseColumns", Skipped]:
    """(columns, skipped): read_chunks as numpy columns, one array per field for the whole file (a million steps
    are ~100 MB of arrays, not ~2 GB of lists), each allocated once, from the readable chunks' headers (a first
    pass), and filled a chunk at a time."""
    size = file_size(path)   # the file as it is now: a live run appends meanwhile
    cap = xcap = 0
    for header, _, _, _ in whole_chunks(Path(path), size):
        cap, xcap = cap + header["n"], xcap + header["nx"]
    code = np.empty(cap, np.uint16)
    start, end, xs = np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(xcap, np.int64)
    nx = np.empty(cap, np.uint8)
    code_of: dict = {}
    odd: list = []        # (column rows before it, record)
    spans: list = []      # (offset, bytes) that held no readable chunk
    rows = nxs = 0
    for header, payload, nbytes, offset in whole_chunks(Path(path), size, spans):
        try:
            c_name, c_start, c_end, c_nx, c_xs = decode_arrays(header, payload)
            lut = np.array([code_of.setdefault(x, len(code_of)) for x in header["names"]] or [0], dtype=np.uint16)
            extra = sorted(header["extra"], key=lambda x: x[0])
            places = [int(i) for i, _ in extra]
            if rows + len(c_name) > cap or nxs + len(c_xs) > xcap:
                raise ValueError("a chunk past what the headers announced")
            c_code = lut[c_name]
        except (ValueError, KeyError, TypeError, IndexError, OverflowError, zlib.error):
            spans.append((offset, nbytes))   # a chunk that does not decode: its records only are lost
            continue
        for k, (i, rec) in enumerate(extra):   # i: its place in the chunk, k: header records before it
            odd.append((rows + places[k] - k, rec))
        n = len(c_name)
        code[rows:rows + n], start[rows:rows + n], end[rows:rows + n] = c_code, c_start, c_end
        nx[rows:rows + n] = c_nx
        xs[nxs:nxs + len(c_xs)] = c_xs
        rows, nxs = rows + n, nxs + len(c_xs)
    if rows < cap or nxs < xcap:   # a chunk that did not decode announced rows that were not read
        code, start, end, nx, xs = code[:rows].copy(), start[:rows].copy(), end[:rows].copy(), nx[:rows].copy(), \
            xs[:nxs].copy()
    return PhaseColumns(list(code_of), code, start, end, nx, xs, odd), Skipped.of(sorted(spans), size)


class PhaseColumns:
    """A run's phase records as columns: `names[code[i]]`, `start[i]`, `end[i]` for the records the chunks hold
    as columns, their integer extras (`nx[i]` of them, flat in `xs`), and the records of any other shape
    (`odd`: (column rows before it, record)), in the order they were written."""

    def __init__(self, names, code, start, end, nx, xs, odd):
        self.names, self.code, self.start, self.end, self.nx, self.xs, self.odd = \
            names, code, start, end, nx, xs, odd

    @classmethod
    def from_records(cls, records: list) -> "PhaseColumns":
        """Columns of a list of records (phases.jsonl of older runs), through the chunk encoder."""
        header_payload = encode_chunk(records)
        if not header_payload:
            return cls([], *(np.zeros(0, t) for t in (np.uint16, np.int64, np.int64, np.uint8, np.int64)), [])
        _, hlen, _, _ = HEAD.unpack_from(header_payload)
        header = json.loads(header_payload[HEAD.size:HEAD.size + hlen])
        name, start, end, nx, xs = decode_arrays(header, header_payload[HEAD.size + hlen:])
        extra = sorted(header["extra"], key=lambda x: x[0])
        odd = [(int(i) - k, rec) for k, (i, rec) in enumerate(extra)]
        return cls(list(header["names"]), name.astype(np.uint16), start, end, nx, xs, odd)

    def __len__(self) -> int:
        return len(self.code) + len(self.odd)

    def concat(self, other: "PhaseColumns") -> "PhaseColumns":
        """These records, then `other`'s."""
        index = {x: i for i, x in enumerate(self.names)}
        lut = np.array([index.setdefault(x, len(index)) for x in other.names] or [0], dtype=np.uint16)
        rows = len(self.code)
        return PhaseColumns(list(index), np.concatenate([self.code, lut[other.code]]),
                            np.concatenate([self.start, other.start]), np.concatenate([self.end, other.end]),
                            np.concatenate([self.nx, other.nx]), np.concatenate([self.xs, other.xs]),
                            self.odd + [(at + rows, r) for at, r in other.odd])

    def codes(self, names) -> np.ndarray:
        """The codes of those of `names` this run has."""
        return np.array([i for i, x in enumerate(self.names) if x in names], dtype=np.uint16)

    def rows(self, names) -> np.ndarray:
        """A mask of the column rows named one of `names`."""
        pick = np.zeros(len(self.names) + 1, dtype=bool)   # per code: a lookup, no sort of the rows
        pick[self.codes(names)] = True
        return pick[self.code]

    def _extras_of(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Where the extras of rows `idx` begin and end in xs, from the rows that have any."""
        with_x = np.flatnonzero(self.nx)
        begin = np.cumsum(self.nx[with_x], dtype=np.int64) - self.nx[with_x]
        at = np.minimum(np.searchsorted(with_x, idx), max(0, len(with_x) - 1))
        has = (with_x[at] == idx) if len(with_x) else np.zeros(len(idx), dtype=bool)
        lo = np.where(has, begin[at] if len(with_x) else 0, 0)
        return lo, lo + np.where(has, self.nx[idx], 0)

    def take(self, mask: np.ndarray) -> "PhaseColumns":
        """The column rows `mask` selects, with their extras, as columns of their own (no odd records)."""
        idx = np.flatnonzero(mask)
        if len(self.xs):
            lo, hi = self._extras_of(idx)
            count = hi - lo
            within = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
            xs = self.xs[np.repeat(lo, count) + within]
        else:
            xs = self.xs[:0]
        return PhaseColumns(self.names, self.code[idx], self.start[idx], self.end[idx], self.nx[idx], xs, [])

    def records(self, mask: np.ndarray | None = None, odd=lambda rec: True) -> list:
        """The records as lists, in their written order: the column rows where `mask` (all without one) and the
        odd records `odd(rec)` keeps."""
        idx = np.flatnonzero(mask) if mask is not None else np.arange(len(self.code))
        names = self.names
        code, start, end = self.code[idx].tolist(), self.start[idx].tolist(), self.end[idx].tolist()
        if not len(self.xs):
            out = [[names[c], s, e] for c, s, e in zip(code, start, end)]
        else:
            lo, hi = self._extras_of(idx)
            xs = self.xs
            out = [[names[c], s, e, *xs[a:b].tolist()] if b > a else [names[c], s, e]
                   for c, s, e, a, b in zip(code, start, end, lo.tolist(), hi.tolist())]
        keep = [(at, rec) for at, rec in self.odd if odd(rec)]
        if not keep:
            return out
        before = np.searchsorted(idx, [at for at, _ in keep], side="left").tolist()   # selected rows before each
        merged, j = [], 0
        for (_, rec), b in zip(keep, before):
            merged += out[j:b]
            merged.append(rec)
            j = b
        return merged + out[j:]


class Chunk:
    """A whole chunk read from disk: its header now, its records when asked (decoding costs ~1 us a record)."""

    def __init__(self, header: dict, payload: bytes):
        self.header, self._payload = header, payload

    @property
    def size(self) -> int:
        return self.header["n"] + len(self.header["extra"])

    def marks(self, name: str) -> int:
        return self.header.get("marks", {}).get(name, 0)

    def records(self) -> list:
        return decode_chunk(self.header, self._payload)


class ChunkTail:
    """Incremental reader (the live status line): the chunks appended whole since the last call."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._offset = 0

    def read_new(self) -> list:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except OSError:
            return []
        out, o = [], 0
        while o + HEAD.size <= len(data):
            magic, hlen, plen, crc = HEAD.unpack_from(data, o)
            body = data[o + HEAD.size:o + HEAD.size + hlen + plen]
            if magic != MAGIC or len(body) < hlen + plen or zlib.crc32(body) != crc:
                break   # not written whole yet: read again next time
            try:
                out.append(Chunk(json.loads(body[:hlen]), body[hlen:]))
            except ValueError:
                break
            o += HEAD.size + hlen + plen
        self._offset += o
        return out
