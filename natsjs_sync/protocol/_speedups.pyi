"""Types of the optional compiled extension (``_speedups.c``)."""

from typing import Any

def setup(cls: type, /) -> None: ...
def accepts(cls: object, /) -> bool: ...
def scan(buf: bytes, pos: int, cls: type, max_payload: int, max_control_line: int, /) -> tuple[list[Any], int]: ...
def ack_tail(reply: str, prefix: str, /) -> tuple[int, int] | None: ...
def route_run(events: list[Any], start: int, routes: dict[int, Any], cls: type, stats: Any, /) -> int: ...

class Inlet:
    msgs_limit: int
    bytes_limit: int
    received: int
    bytes_in: int
    bytes_out: int
    dropped: int
    max: int
    closed: int
    slow: int
    on_max: Any
    get: Any
    on_take: Any
    takeable: int
    def __init__(self, put: Any, qsize: Any, msgs_limit: int, bytes_limit: int, on_slow: Any = None) -> None: ...
    def __call__(self, msg: Any, /) -> None: ...
    def take(self, timeout: Any, /) -> Any: ...

class Outlet:
    buffer: bytearray
    subjects: dict[str, bytes]
    on_wake: Any
    on_full: Any
    threshold: int
    max_payload: int
    out_msgs: int
    out_bytes: int
    open: int
    flush_requested: int
    def __init__(self, buffer: bytearray, subjects: dict[str, bytes], threshold: int, on_wake: Any,
                 on_full: Any) -> None: ...
    def __call__(self, subject: str, payload: object, /) -> bool: ...
