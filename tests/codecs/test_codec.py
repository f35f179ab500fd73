"""The codecs themselves, without a server: formats, types, errors, the choice by content type."""

from __future__ import annotations

import dataclasses
import pickle
from typing import TypedDict

import msgspec
import pytest

from natsjs_sync import Msg, NatsError, PayloadDecodeError, PayloadEncodeError
from natsjs_sync.codecs import CONTENT_TYPE, JSON, MSGPACK, Codec, codec_for, decode_msg, register_codec
from natsjs_sync.protocol.headers import encode_headers


class Item(msgspec.Struct):
    sku: str
    qty: int


class Order(msgspec.Struct):
    id: int
    items: list[Item]


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Named(TypedDict):
    name: str
    age: int


VALUES = [
    (Order(1, [Item("tea", 2)]), Order),
    (Point(1, 2), Point),
    ({"name": "ada", "age": 36}, Named),
    ({"a": 1}, dict[str, int]),
    ([1, 2, 3], list[int]),
    ("text", str),
]


@pytest.mark.parametrize("codec", [JSON, MSGPACK], ids=["json", "msgpack"])
@pytest.mark.parametrize(("value", "type_"), VALUES, ids=[t.__name__ if hasattr(t, "__name__") else str(t)
                                                          for _, t in VALUES])
def test_round_trip(codec: Codec, value: object, type_: type) -> None:
    assert codec.decode(codec.encode(value), type_) == value


def test_content_types_and_headers() -> None:
    assert JSON.content_type == "application/json"
    assert MSGPACK.content_type == "application/msgpack"
    assert JSON.headers == {CONTENT_TYPE: "application/json"}
    data, headers = JSON.encode_message(Item("tea", 1), {"Content-Type": "text/plain", "X-Trace": "1"})
    assert data == b'{"sku":"tea","qty":1}'
    assert dict(headers) == {"X-Trace": "1", "content-type": "application/json"}
    assert codec_for("application/json; charset=utf-8") is JSON
    assert codec_for("Application/X-MsgPack") is MSGPACK
    assert codec_for("application/vnd.msgpack") is MSGPACK
    assert codec_for("text/csv") is None


def test_shared_headers_cannot_be_changed() -> None:
    _, headers = JSON.encode_message(1)
    with pytest.raises(TypeError):
        headers["x"] = "y"  # type: ignore[index]
    with pytest.raises(TypeError):
        headers |= {"x": "y"}  # type: ignore[operator]  # in place: every later message would carry it
    assert JSON.encode_message(1)[1] == {"content-type": "application/json"}


def test_validation_error_names_type_and_field() -> None:
    with pytest.raises(PayloadDecodeError) as info:
        JSON.decode(b'{"id": 1, "items": [{"sku": "tea", "qty": "two"}]}', Order)
    exc = info.value
    assert isinstance(exc, NatsError) and isinstance(exc, ValueError)
    assert exc.type is Order
    assert exc.field == "$.items[0].qty"
    assert exc.content_type == "application/json"
    assert "Order" in str(exc) and "$.items[0].qty" in str(exc)
    again = pickle.loads(pickle.dumps(exc))
    assert (again.field, again.type, str(again)) == (exc.field, exc.type, str(exc))


def test_malformed_payload_has_no_field() -> None:
    with pytest.raises(PayloadDecodeError) as info:
        MSGPACK.decode(b"\xc1", Order)
    assert info.value.field is None
    assert info.value.content_type == "application/msgpack"


def test_encode_error_is_ours_and_a_type_error() -> None:
    with pytest.raises(PayloadEncodeError) as info:
        JSON.encode(object())
    assert isinstance(info.value, TypeError)
    with pytest.raises(PayloadEncodeError):
        MSGPACK.encode(2**70)  # too large for MessagePack


@pytest.mark.parametrize("codec", [JSON, MSGPACK], ids=["json", "msgpack"])
def test_a_value_without_an_encoding_is_an_encode_error(codec: Codec) -> None:
    # A lone surrogate (a received subject decoded with surrogateescape) has no UTF-8 form, and a
    # value that holds itself has no end: both are values the codec cannot encode, as any other.
    cycle: list[object] = []
    cycle.append(cycle)
    for value in ({"subject": "orders.\udcff"}, cycle):
        with pytest.raises(PayloadEncodeError, match=f"as {codec.content_type}"):
            codec.encode(value)


def test_a_type_no_codec_can_decode_into_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        JSON.decode(b"1", object.__new__)  # type: ignore[arg-type]


def _msg(data: bytes, headers: dict[str, str] | None = None, reply: str = "") -> Msg:
    return Msg("orders.new", 1, reply, encode_headers(headers) if headers is not None else None, data)


def test_msg_decode_picks_the_codec_by_header() -> None:
    packed = MSGPACK.encode(Item("tea", 1))
    assert _msg(packed, {"content-type": "application/msgpack"}).decode(Item) == Item("tea", 1)
    # Any case, other headers around it, parameters: parsed, not recognised by the exact block.
    assert _msg(packed, {"X-A": "1", "Content-Type": "application/x-msgpack"}).decode(Item) == Item("tea", 1)
    # The header wins over the caller's codec for other formats.
    assert _msg(b'{"sku":"a","qty":2}', {"content-type": "application/json; charset=utf-8"}).decode(
        Item, MSGPACK) == Item("a", 2)


def test_msg_without_content_type_decodes_as_the_caller_says() -> None:
    packed = MSGPACK.encode(Item("tea", 1))
    assert _msg(packed).decode(Item, MSGPACK) == Item("tea", 1)
    assert _msg(packed, {"X-Other": "1"}).decode(Item, MSGPACK) == Item("tea", 1)
    assert _msg(b'{"sku":"a","qty":2}').decode(Item) == Item("a", 2)  # default: JSON


def test_unknown_content_type_is_a_decode_error() -> None:
    with pytest.raises(PayloadDecodeError, match="text/csv"):
        _msg(b"a,b", {"content-type": "text/csv"}).decode(Item)


def test_decode_error_of_a_jetstream_message_names_subject_and_sequence() -> None:
    reply = "$JS.ACK.ORDERS.c.1.42.7.1700000000000000000.0"
    with pytest.raises(PayloadDecodeError) as info:
        decode_msg(_msg(b'{"sku":"a"}', reply=reply), Item)
    exc = info.value
    assert (exc.subject, exc.stream_sequence, exc.type) == ("orders.new", 42, Item)
    assert "orders.new" in str(exc) and "42" in str(exc)
    assert exc.field == "$.qty"  # missing: msgspec names it in the message, not the path


class Upper(Codec):
    """A codec of the user's: text, upper-cased on the wire."""

    content_type = "text/x-upper"

    def encode(self, value: object) -> bytes:
        return str(value).upper().encode()

    def decode(self, data: bytes | bytearray | memoryview, type_: type) -> object:  # type: ignore[override]
        text = bytes(data).decode()
        if not text.isupper():
            raise ValueError("not upper case")
        return type_(text.lower())


def test_a_registered_codec_of_ones_own() -> None:
    codec = register_codec(Upper())
    assert codec_for("text/x-upper") is codec
    data, headers = codec.encode_message("hi")
    assert _msg(data, dict(headers)).decode(str) == "hi"
    with pytest.raises(PayloadDecodeError, match="not upper case"):
        _msg(b"hi", dict(headers)).decode(str)


class TestPydantic:
    pydantic = pytest.importorskip("pydantic", reason="the pydantic extra is not installed")

    def model(self) -> type:
        class Line(self.pydantic.BaseModel):  # type: ignore[name-defined,misc]
            sku: str
            qty: int

        class Basket(self.pydantic.BaseModel):  # type: ignore[name-defined,misc]
            id: int
            lines: list[Line]

        return Basket

    @pytest.mark.parametrize("codec", [JSON, MSGPACK], ids=["json", "msgpack"])
    def test_round_trip(self, codec: Codec) -> None:
        basket = self.model()
        value = basket(id=1, lines=[{"sku": "tea", "qty": 2}])
        assert codec.decode(codec.encode(value), basket) == value

    @pytest.mark.parametrize("codec", [JSON, MSGPACK], ids=["json", "msgpack"])
    def test_validation_error_names_the_field(self, codec: Codec) -> None:
        basket = self.model()
        with pytest.raises(PayloadDecodeError) as info:
            codec.decode(codec.encode({"id": 1, "lines": [{"sku": "tea", "qty": "two"}]}), basket)
        assert info.value.field == "$.lines[0].qty"
        assert info.value.type is basket

    def test_bytes_and_timestamps_round_trip_as_msgpack(self) -> None:
        import datetime

        class Blob(self.pydantic.BaseModel):  # type: ignore[name-defined,misc]
            data: bytes
            at: datetime.datetime

        value = Blob(data=b"\xff\x00", at=datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc))
        assert MSGPACK.decode(MSGPACK.encode(value), Blob) == value

    def test_a_model_without_a_json_form_is_an_encode_error(self) -> None:
        class Blob(self.pydantic.BaseModel):  # type: ignore[name-defined,misc]
            data: bytes

        with pytest.raises(PayloadEncodeError, match="Blob"):
            JSON.encode(Blob(data=b"\xff"))  # pydantic writes bytes to JSON as UTF-8 text

    @pytest.mark.parametrize("codec", [JSON, MSGPACK], ids=["json", "msgpack"])
    def test_containers_of_models_round_trip(self, codec: Codec) -> None:
        basket = self.model()
        one, two = basket(id=1, lines=[{"sku": "tea", "qty": 2}]), basket(id=2, lines=[])
        for value, type_ in (([one, two], list[basket]), ({"a": one}, dict[str, basket]),
                             (one, basket | None), (None, basket | None), ((one, 3), tuple[basket, int])):
            assert codec.decode(codec.encode(value), type_) == value
            assert codec.decode(memoryview(codec.encode(value)), type_) == value
        if codec is JSON:  # each model as its own dump writes it
            assert codec.encode([one, two]) == b"[" + codec.encode(one) + b"," + codec.encode(two) + b"]"

    @pytest.mark.parametrize("codec", [JSON, MSGPACK], ids=["json", "msgpack"])
    def test_a_container_of_models_names_the_failing_field(self, codec: Codec) -> None:
        basket = self.model()
        good = {"id": 1, "lines": []}
        with pytest.raises(PayloadDecodeError) as info:
            codec.decode(codec.encode([good, {"id": 2, "lines": [{"sku": "tea", "qty": "two"}]}]), list[basket])
        assert info.value.field == "$[1].lines[0].qty"
        assert info.value.type == list[basket] and info.value.content_type == codec.content_type
        with pytest.raises(PayloadDecodeError) as info:
            codec.decode(codec.encode({"k": {"id": "x", "lines": []}}), dict[str, basket])
        assert info.value.field == "$.k.id"

    def test_a_container_of_models_without_a_json_form_is_an_encode_error(self) -> None:
        class Blob(self.pydantic.BaseModel):  # type: ignore[name-defined,misc]
            data: bytes

        with pytest.raises(PayloadEncodeError, match="list"):
            JSON.encode([Blob(data=b"\xff")])
        assert MSGPACK.decode(MSGPACK.encode([Blob(data=b"\xff")]), list[Blob]) == [Blob(data=b"\xff")]
        with pytest.raises(PayloadEncodeError):  # no model in it: msgspec's refusal, as before
            JSON.encode([object()])
