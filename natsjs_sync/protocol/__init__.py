"""The sans-IO NATS protocol: no sockets, threads or clocks in this package.

- :mod:`.parser`: bytes in, events out.
- :mod:`.commands`: commands in, bytes out.
- :mod:`.headers`: ``NATS/1.0`` header blocks.
- :mod:`.subjects`: subject and queue-name validation.
- :mod:`.nuid`: unique ids and inboxes.
"""

from . import commands
from .headers import Headers, encode_headers, parse_headers
from .nuid import NUID, new_inbox, next_nuid
from .parser import NEED_DATA, OK, PING, PONG, Err, Info, MsgEvent, Parser
from .subjects import validate_queue, validate_subject, validate_subscribe_subject

__all__ = [
    "NEED_DATA",
    "NUID",
    "OK",
    "PING",
    "PONG",
    "Err",
    "Headers",
    "Info",
    "MsgEvent",
    "Parser",
    "commands",
    "encode_headers",
    "new_inbox",
    "next_nuid",
    "parse_headers",
    "validate_queue",
    "validate_subject",
    "validate_subscribe_subject",
]
