"""Payloads as columns: the ``valueFormat`` option of the ``jetstream`` data source.

On read, ``valueFormat`` ``json`` or ``msgpack`` with ``valueSchema`` (a DDL
string, ``"id BIGINT, name STRING, tags ARRAY<STRING>"``) turns each message's
payload into those columns, in place of ``data``. The schema is compiled once
per partition into a msgspec type, so a payload is decoded and checked (types,
integer ranges, nested structs, lists, maps) in one compiled pass; a payload
that does not fit either fails the task naming the stream, sequence, subject and
field (``mode`` ``FAILFAST``, the default), or (``PERMISSIVE``) reads as nulls
with the raw payload in a column of its own (``columnNameOfCorruptRecord``,
default ``_corrupt_record``, as Spark's JSON source names it). No row is ever
dropped.

A ``TIMESTAMP`` field takes what Spark's own JSON reader (``from_json``,
``spark.read.json``) takes: an RFC 3339 string (or a MessagePack timestamp), or
an integer, read as seconds since the epoch. A fractional number is a bad
payload there as here, and so are ``TIMESTAMP_NTZ`` and ``DATE`` given a
number. One difference: seconds too large for a timestamp's microseconds
(beyond about year 294,000) are a bad payload here, where Spark wraps them round.

On write, a ``data`` (or ``value``) column of a struct, map or array type is
encoded as JSON or MessagePack with the same option, and each message says so
in its ``content-type`` header (:func:`content_type`: the codecs' header and
values), so typed readers (``sub.typed(T)``, ``Msg.decode``) pick the format.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Callable, Sequence
from typing import Annotated, Any

import msgspec

#: The formats a payload can be read and written in.
FORMATS = ("binary", "json", "msgpack")
#: Read modes for a payload that does not decode (Spark's JSON source's names; no row is ever dropped).
MODES = ("FAILFAST", "PERMISSIVE")
DEFAULT_CORRUPT_COLUMN = "_corrupt_record"

_INT_RANGES = {"ByteType": 8, "ShortType": 16, "IntegerType": 32, "LongType": 64}
_MICROS = 1_000_000
#: Integer seconds since the epoch in a TIMESTAMP field (Spark's JSON reader), within its microseconds' range.
_EPOCH_SECONDS = Annotated[int, msgspec.Meta(ge=-(2 ** 63) // _MICROS + 1, le=(2 ** 63 - 1) // _MICROS)]
#: Values msgspec hands over as they are (Arrow builds the columns from them).
_KEEP = (datetime.datetime, datetime.date, decimal.Decimal, bytes)


class PayloadError(ValueError):
    """A payload that does not decode into the read's ``valueSchema`` (mode ``FAILFAST``)."""


def _msgspec_type(dt: Any, path: str) -> Any:
    """The msgspec type that checks values of the Spark type ``dt`` (nullable)."""
    from pyspark.sql import types as T

    name = type(dt).__name__
    if name in _INT_RANGES:
        bits = _INT_RANGES[name]
        base: Any = Annotated[int, msgspec.Meta(ge=-(2 ** (bits - 1)), le=2 ** (bits - 1) - 1)]
    elif isinstance(dt, (T.FloatType, T.DoubleType)):
        base = float
    elif isinstance(dt, T.BooleanType):
        base = bool
    elif isinstance(dt, T.StringType):
        base = str
    elif isinstance(dt, T.BinaryType):
        base = bytes
    elif isinstance(dt, T.TimestampType):
        base = datetime.datetime | _EPOCH_SECONDS  # the integer: epoch seconds, made microseconds by _epoch_fix
    elif isinstance(dt, T.TimestampNTZType):
        base = datetime.datetime
    elif isinstance(dt, T.DateType):
        base = datetime.date
    elif isinstance(dt, T.DecimalType):
        base = decimal.Decimal
    elif isinstance(dt, T.ArrayType):
        base = list[_msgspec_type(dt.elementType, path + "[]")]  # type: ignore[misc]
    elif isinstance(dt, T.MapType):
        if not isinstance(dt.keyType, T.StringType):
            raise ValueError(f"option 'valueSchema': field {path!r} is a map with {dt.keyType.simpleString()} "
                             "keys; JSON and MessagePack maps here have string keys")
        base = dict[str, _msgspec_type(dt.valueType, path + "{}")]  # type: ignore[misc]
    elif isinstance(dt, T.StructType):
        base = _struct_type(dt, path)
    else:
        raise ValueError(f"option 'valueSchema': field {path!r} has type {dt.simpleString()}, which a "
                         "payload cannot hold (strings, numbers, booleans, binary, dates, timestamps, decimals, "
                         "arrays, maps with string keys and structs can)")
    return base | None


def _struct_type(st: Any, path: str = "") -> type[msgspec.Struct]:
    # Field names need not be identifiers: each is an attribute f<i> renamed to the field's name.
    fields = [(f"f{i}", _msgspec_type(f.dataType, f"{path}.{f.name}" if path else f.name), None)
              for i, f in enumerate(st.fields)]
    return msgspec.defstruct("Payload", fields, rename={f"f{i}": f.name for i, f in enumerate(st.fields)},
                             kw_only=True)


def _seconds_to_micros(value: Any) -> Any:
    # Arrow takes an int in a timestamp column as microseconds since the epoch.
    return value * _MICROS if type(value) is int else value


def _epoch_fix(dt: Any) -> Callable[[Any], Any] | None:
    """What turns the epoch seconds in a decoded value of the Spark type ``dt`` into microseconds
    (the int a TIMESTAMP field took); ``None`` when ``dt`` holds no TIMESTAMP (nothing to do)."""
    from pyspark.sql import types as T

    if isinstance(dt, T.TimestampType):
        return _seconds_to_micros
    if isinstance(dt, (T.ArrayType, T.MapType)):
        inner = _epoch_fix(dt.elementType if isinstance(dt, T.ArrayType) else dt.valueType)
        if inner is None:
            return None
        if isinstance(dt, T.ArrayType):
            return lambda v: v if v is None else [inner(x) for x in v]
        return lambda v: v if v is None else {k: inner(x) for k, x in v.items()}
    if isinstance(dt, T.StructType):
        fixes = [(f.name, fix) for f in dt.fields if (fix := _epoch_fix(f.dataType)) is not None]
        if not fixes:
            return None

        def fix_struct(v: Any) -> Any:
            if v is not None:
                for name, fix in fixes:
                    if name in v:
                        v[name] = fix(v[name])
            return v

        return fix_struct
    return None


def check_fields(fields: Any, fixed: Sequence[Any]) -> Any:
    """The payload's columns (a StructType) once checked: names apart from the fixed columns, types a
    payload can hold.

    Raises:
        ValueError: naming the option and the field.
    """
    if not fields.fields:
        raise ValueError("option 'valueSchema' names no field")
    taken = {f.name.lower() for f in fixed}
    clash = [f.name for f in fields.fields if f.name.lower() in taken]
    if clash:
        raise ValueError(f"option 'valueSchema': field {clash[0]!r} has the name of a column every row has "
                         f"({', '.join(f.name for f in fixed)}): rename it in the schema")
    _struct_type(fields)  # refuses the types a payload cannot hold
    return fields


class PayloadReader:
    """Decodes the payloads of a partition into the columns of ``valueSchema`` (picklable: rebuilt per task)."""

    def __init__(self, fmt: str, fields: Any, mode: str, corrupt_column: str | None) -> None:
        self.fmt = fmt
        self.fields = fields  # a StructType: the payload's columns, in order
        self.mode = mode
        self.corrupt_column = corrupt_column
        self._decode: Callable[[bytes], Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if k != "_decode"} | {"_decode": None}

    def _decoder(self) -> Callable[[bytes], Any]:
        if self._decode is None:
            payload_type = _struct_type(self.fields)
            decoder: Any = (msgspec.json.Decoder if self.fmt == "json" else msgspec.msgpack.Decoder)(payload_type)
            self._decode = decoder.decode
        return self._decode

    def arrow_fields(self) -> list[tuple[str, Any]]:
        """The Arrow columns this reader adds (the payload's fields, then the corrupt-record column)."""
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_type

        out = [(f.name, to_arrow_type(f.dataType, timezone="UTC")) for f in self.fields.fields]
        if self.corrupt_column:
            out.append((self.corrupt_column, pa.binary()))
        return out

    def columns(self, stream: str, rows: Sequence[tuple[str, int, int, Any, bytes]], types: list[Any]) -> list[Any]:
        """The Arrow arrays of the payload's fields (and corrupt column) for ``rows``."""
        import pyarrow as pa

        decode = self._decoder()
        names = [f.name for f in self.fields.fields]
        fixes = [(i, fix) for i, f in enumerate(self.fields.fields) if (fix := _epoch_fix(f.dataType)) is not None]
        values: list[list[Any]] = [[] for _ in names]
        corrupt: list[bytes | None] = []
        for subject, seq, _time, _headers, data in rows:
            try:
                decoded = msgspec.to_builtins(decode(data), builtin_types=_KEEP)
            except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
                # RecursionError: msgspec at its nesting limit (a few kilobytes of "[" anywhere in the
                # payload, in a field of the schema or not): a payload that does not decode like any other.
                why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
                self._bad(stream, subject, seq, why)
                for column in values:
                    column.append(None)
                corrupt.append(bytes(data))
                continue
            for i, name in enumerate(names):
                values[i].append(decoded.get(name))
            for i, fix in fixes:
                values[i][-1] = fix(values[i][-1])
            corrupt.append(None)
        try:
            arrays = [pa.array(column, types[i]) for i, column in enumerate(values)]
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            # A value msgspec took that its column cannot hold (a decimal's precision or scale): found
            # row by row, and handled as a payload that does not decode; then every column is built again.
            for r in range(len(rows)):
                bad = next((i for i, column in enumerate(values)
                            if column[r] is not None and not _fits(column[r], types[i])), None)
                if bad is not None:
                    subject, seq, _time, _headers, data = rows[r]
                    self._bad(stream, subject, seq, f"field {names[bad]!r}: {values[bad][r]!r} does not fit "
                                                    f"{self.fields.fields[bad].dataType.simpleString()}")
                    for column in values:
                        column[r] = None
                    corrupt[r] = bytes(data)
            arrays = [pa.array(column, types[i]) for i, column in enumerate(values)]
        if self.corrupt_column:
            arrays.append(pa.array(corrupt, pa.binary()))
        return arrays

    def _bad(self, stream: str, subject: str, seq: int, why: str) -> None:
        """A payload that does not decode: the task fails (FAILFAST), or the row reads as nulls."""
        if self.mode == "FAILFAST":
            raise PayloadError(
                f"stream {stream!r} sequence {seq} (subject {subject!r}): the payload is not {self.fmt} of the "
                f"option 'valueSchema': {why} (mode PERMISSIVE reads it as nulls with the payload in column "
                f"{self.corrupt_column or DEFAULT_CORRUPT_COLUMN!r})")


def _fits(value: Any, arrow_type: Any) -> bool:
    import pyarrow as pa

    try:
        pa.array([value], arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return False
    return True


def content_type(fmt: str) -> str | None:
    """The ``content-type`` a payload written in ``fmt`` carries (that of :mod:`natsjs_sync.codecs`), or ``None``."""
    from ..codecs import JSON, MSGPACK

    return {"json": JSON.content_type, "msgpack": MSGPACK.content_type}.get(fmt)


def encoder(fmt: str) -> Callable[[Any], bytes]:
    """Encodes a struct, map or array cell (as Arrow gives it to Python) as a payload."""
    if fmt == "json":
        return msgspec.json.Encoder(decimal_format="number").encode
    return msgspec.msgpack.Encoder(decimal_format="number").encode
