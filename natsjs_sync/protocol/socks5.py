"""The client side of SOCKS5 (RFC 1928) with user/password authentication (RFC 1929), without I/O.

:class:`Socks5Handshake` turns the proxy's bytes into the next bytes to send,
until the proxy has connected us to the server; from then on the stream is the
server's. The server's host name is sent to the proxy as it is (address type
"domain name"): the proxy resolves it, so a name only the proxy's network knows
works, and no DNS query leaves this host. An IP literal is sent as an address.
"""

from __future__ import annotations

import ipaddress
import struct

from ..errors import NatsConnectionError, ProtocolError

VERSION = 5
#: RFC 1929's sub-negotiation version.
AUTH_VERSION = 1
METHOD_NO_AUTH = 0x00
METHOD_USER_PASSWORD = 0x02
METHOD_NONE_ACCEPTABLE = 0xFF
CMD_CONNECT = 0x01
ATYP_IPV4 = 0x01
ATYP_DOMAIN = 0x03
ATYP_IPV6 = 0x04

#: RFC 1928 section 6: what a proxy's reply code means.
REPLIES = {
    0x01: "general SOCKS server failure",
    0x02: "connection not allowed by ruleset",
    0x03: "network unreachable",
    0x04: "host unreachable",
    0x05: "connection refused",
    0x06: "TTL expired",
    0x07: "command not supported",
    0x08: "address type not supported",
}


def _field(text: str, what: str) -> bytes:
    """A length-prefixed field of 1 to 255 bytes (RFC 1929's user and password, a domain name)."""
    raw = text.encode()
    if not 1 <= len(raw) <= 255:
        raise ValueError(f"the SOCKS5 {what} must be 1 to 255 bytes long, got {len(raw)}")
    return bytes([len(raw)]) + raw


def greeting(with_password: bool) -> bytes:
    """The methods we offer: none, and user/password when we have them."""
    methods = [METHOD_NO_AUTH, METHOD_USER_PASSWORD] if with_password else [METHOD_NO_AUTH]
    return bytes([VERSION, len(methods), *methods])


def password_request(username: str, password: str) -> bytes:
    """RFC 1929's user/password request."""
    return bytes([AUTH_VERSION]) + _field(username, "user name") + _field(password, "password")


def connect_request(host: str, port: int) -> bytes:
    """CONNECT to ``host:port``: an IP literal as an address, any other name as a domain (remote DNS)."""
    if not 0 < port < 65536:
        raise ValueError(f"port must be 1 to 65535, got {port}")
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        address = bytes([ATYP_DOMAIN]) + _field(host, "host name")
    else:
        address = bytes([ATYP_IPV4 if ip.version == 4 else ATYP_IPV6]) + ip.packed
    return bytes([VERSION, CMD_CONNECT, 0]) + address + struct.pack("!H", port)


class Socks5Handshake:
    """One SOCKS5 CONNECT, driven by the proxy's bytes. Not thread-safe (one opener).

    Usage: send :meth:`start`'s bytes; then for each read, send what
    :meth:`receive` returns, until :attr:`done`. Bytes the proxy sent after its
    final reply (the server's first bytes) are in :attr:`leftover`.
    """

    def __init__(self, host: str, port: int, username: str | None = None, password: str | None = None):
        if (username is None) != (password is None):
            raise ValueError("a SOCKS5 user name needs a password, and a password a user name")
        self._target = connect_request(host, port)
        self._auth = password_request(username, password) if username is not None and password is not None else None
        self._buf = bytearray()
        self._step = "method"
        self.done = False
        self.leftover = b""

    @property
    def needed(self) -> int:
        """How many more bytes the current step needs at least: reading no more than
        this never takes the server's first bytes (which follow the final reply)."""
        have = len(self._buf)
        if self._step != "reply":
            return max(2 - have, 0)
        if have < 5:
            return 5 - have
        return max(self._reply_size() - have, 0)

    def _reply_size(self) -> int:
        atyp = self._buf[3]
        if atyp == ATYP_IPV4:
            return 4 + 4 + 2
        if atyp == ATYP_IPV6:
            return 4 + 16 + 2
        if atyp == ATYP_DOMAIN:
            return 4 + 1 + self._buf[4] + 2
        raise ProtocolError(f"the SOCKS5 proxy's reply has an unknown address type {atyp}")

    def start(self) -> bytes:
        """The first bytes to send (the greeting)."""
        return greeting(self._auth is not None)

    def receive(self, data: bytes) -> bytes:
        """Take the proxy's bytes; returns the bytes to send next (``b""``: none, read more).

        Raises:
            NatsConnectionError: the proxy refused (no acceptable method, bad
                credentials, or a reply code other than success, named).
            ProtocolError: the proxy's answer is not SOCKS5.
        """
        if self.done:
            raise ProtocolError("the SOCKS5 handshake is already over")
        self._buf += data
        out = bytearray()
        while not self.done:
            sent = self._advance()
            if sent is None:
                break
            out += sent
        return bytes(out)

    def _advance(self) -> bytes | None:
        """One step if its bytes are all here (``None``: wait for more)."""
        buf = self._buf
        if self._step == "method":
            if len(buf) < 2:
                return None
            version, method = buf[0], buf[1]
            del buf[:2]
            if version != VERSION:
                raise ProtocolError(f"the proxy does not speak SOCKS5 (version {version})")
            if method == METHOD_NO_AUTH:
                self._step = "reply"
                return self._target
            if method == METHOD_USER_PASSWORD and self._auth is not None:
                self._step = "auth"
                return self._auth
            if method == METHOD_NONE_ACCEPTABLE or method == METHOD_USER_PASSWORD:
                offered = "no authentication or a user name and password" if self._auth else "no authentication"
                raise NatsConnectionError(f"the SOCKS5 proxy accepts none of the methods offered ({offered})")
            raise ProtocolError(f"the SOCKS5 proxy chose method {method}, which was not offered")
        if self._step == "auth":
            if len(buf) < 2:
                return None
            status = buf[1]
            del buf[:2]
            if status != 0:
                raise NatsConnectionError("the SOCKS5 proxy refused the user name and password")
            self._step = "reply"
            return self._target
        # The final reply: VER REP RSV ATYP BND.ADDR BND.PORT, the address's length set by ATYP.
        if len(buf) < 2:
            return None
        version, reply = buf[0], buf[1]
        if version != VERSION:
            raise ProtocolError(f"the proxy's reply is not SOCKS5 (version {version})")
        if reply != 0:
            raise NatsConnectionError(
                f"the SOCKS5 proxy could not connect to the server: {REPLIES.get(reply, f'reply code {reply}')}")
        if len(buf) < 5:
            return None
        size = self._reply_size()
        if len(buf) < size:
            return None
        self.leftover = bytes(buf[size:])
        del buf[:]
        self.done = True
        return b""
