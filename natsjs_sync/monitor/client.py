"""The typed client of the servers' monitoring requests (the system account's API).

Every server subscribes, in the system account, to ``$SYS.REQ.SERVER.PING.<kind>``
(all servers answer: this client gathers the answers) and to
``$SYS.REQ.SERVER.<id>.<kind>`` (that one server answers). The answers are the
documents the HTTP monitoring port serves as ``/varz``, ``/connz``, ...; here
they arrive over NATS, so one connection reaches every server of a cluster (and
of a super-cluster), monitoring port or not.

Only users of the system account get answers: elsewhere nobody is subscribed to
those subjects, and :class:`~natsjs_sync.monitor.SystemAccountRequiredError`
says so instead of a bare "no responders".
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from .._timeout import USE_DEFAULT, Deadline, TimeoutArg
from ..errors import NoRespondersError, PermissionsError
from ..errors import TimeoutError as NatsTimeoutError
from .errors import MonitorError, MonitorResponseError, SystemAccountRequiredError
from .models import (
    AccountJetStream,
    Accountz,
    Connz,
    Gatewayz,
    Healthz,
    Jsz,
    Leafz,
    Routez,
    ServerIdentity,
    ServerReply,
    Statsz,
    Subsz,
    Varz,
    decode_as,
)

if TYPE_CHECKING:
    from ..client import Client

T = TypeVar("T")

#: The whole wait of a request when ``timeout`` is not given, in seconds.
DEFAULT_TIMEOUT = 5.0
#: After the first answer to a gathered request, how long to wait for another
#: before deciding every server has answered (when ``expected`` is not given).
DEFAULT_STALL = 0.5

#: The monitoring kinds and the model of their answers.
KINDS: dict[str, type[Any]] = {
    "VARZ": Varz, "CONNZ": Connz, "SUBSZ": Subsz, "ROUTEZ": Routez, "GATEWAYZ": Gatewayz,
    "LEAFZ": Leafz, "ACCOUNTZ": Accountz, "JSZ": Jsz, "HEALTHZ": Healthz, "STATSZ": Statsz,
}

_CONN_STATES = {"open": 0, "closed": 1, "all": 2}


class ServerFilter(msgspec.Struct, frozen=True, kw_only=True):
    """Which servers answer a gathered request; a server answers when it matches every field given.

    Attributes:
        name: the server's name.
        cluster: its cluster's name.
        host: the host it listens on.
        tags: tags it must all have.
        domain: its JetStream domain.
    """

    name: str | None = msgspec.field(default=None, name="server_name")
    cluster: str | None = None
    host: str | None = None
    tags: list[str] | None = None
    domain: str | None = None


def _options(**values: Any) -> dict[str, Any]:
    """The request body: Go omits empty options, so do we (a server may refuse one it does not know)."""
    return {k: v for k, v in values.items() if v not in (None, False, "", 0)}


class SystemClient:
    """Monitoring requests to the servers, over a connection of a system-account user. Thread-safe.

    Each ``<kind>()`` method returns one :class:`~natsjs_sync.monitor.ServerReply` per
    server that answered: every server (gathered from ``$SYS.REQ.SERVER.PING.<kind>``),
    the servers matching ``servers=`` (a :class:`ServerFilter`), or the one server whose
    id is ``server=`` (``$SYS.REQ.SERVER.<id>.<kind>``).

    A gathered request ends when ``expected`` servers have answered, when ``timeout``
    has passed, or (``expected`` not given) when no other answer came ``stall`` seconds
    after the last one. A server that is down simply does not answer: compare the
    answers with what you expect.

    Args:
        nc: a connected client whose user is in the system account.
        timeout: the default whole wait of a request, in seconds.
        stall: the default wait for one more answer once one came (gathered requests).

    Example::

        sys = SystemClient(nc)
        for reply in sys.varz(expected=3):
            print(reply.server.name, reply.data.connections)
    """

    def __init__(self, nc: Client, *, timeout: float = DEFAULT_TIMEOUT, stall: float = DEFAULT_STALL):
        self.nc = nc
        self.timeout = timeout
        self.stall = stall

    # ------------------------------------------------------------------ the machinery

    def request(
        self,
        kind: str,
        options: dict[str, Any] | None = None,
        type_: type[T] = dict,  # type: ignore[assignment]
        *,
        server: str | None = None,
        servers: ServerFilter | None = None,
        expected: int | None = None,
        timeout: TimeoutArg = USE_DEFAULT,
        subject: str | None = None,
    ) -> list[ServerReply[T]]:
        """Send one monitoring request and gather the answers, decoded as ``type_``.

        The one path every typed method takes; call it for a kind without a method of
        its own (``"RAFTZ"``, ``"IPQUEUESZ"``: answers as dicts).

        Args:
            kind: ``"VARZ"``, ``"CONNZ"``, ... (the last token of the subject).
            options: the request's options, as the server names them (JSON keys).
            type_: the model of the answers' ``data`` (``dict``: as decoded).
            server: the id of the one server to ask; all servers when ``None``.
            servers: only the servers matching this filter answer (gathered requests).
            expected: stop waiting once this many servers have answered.
            timeout: the whole wait, in seconds (default: this client's).
            subject: the request's subject, when it is not ``$SYS.REQ.SERVER.*.<kind>``.

        Returns:
            One reply per server that answered, in arrival order.

        Raises:
            SystemAccountRequiredError: nobody answers: the user is not in the system account.
            PermissionsError: the user may not publish the request (or subscribe to its inbox).
            MonitorError: a server answered with an error (bad options, unknown server id).
            MonitorResponseError: an answer this client cannot decode.
            TimeoutError: ``server`` was given and it did not answer within ``timeout``.
        """
        deadline = timeout if isinstance(timeout, Deadline) else Deadline.of(timeout, self.timeout)
        body = dict(options or {})
        if servers is not None:
            body.update(msgspec.to_builtins(servers))
        if subject is None:
            subject = f"$SYS.REQ.SERVER.{server or 'PING'}.{kind}" if kind else f"$SYS.REQ.SERVER.{server or 'PING'}"
        single = server is not None
        payload = msgspec.json.encode(body) if body else b""
        sent = time.monotonic()
        replies: list[ServerReply[T]] = []
        earlier_error = self.nc.last_error
        try:
            with self.nc.request_many(
                subject, payload, timeout=deadline,
                max_messages=1 if single else expected,
                stall=None if single or expected else self.stall,
            ) as answers:
                self._check_permissions(subject, answers.inbox, earlier_error, deadline)
                for msg in answers:
                    replies.append(self._decode(msg.data, kind, type_, time.monotonic() - sent))
        except NoRespondersError:
            raise self._nobody_answered(subject, server) from None
        if single and not replies:
            raise NatsTimeoutError(f"server {server} did not answer {subject} within the timeout")
        return replies

    def _check_permissions(self, subject: str, inbox: str, earlier: Exception | None, deadline: Deadline) -> None:
        """Fail at once when the server refused to let us send the request (or hear the answers).

        A user of the system account may still be denied ``$SYS.REQ.>``: the server then
        answers the publish with an asynchronous ``-ERR``, and nobody would ever answer.
        The ``-ERR`` comes before the ``PONG`` of a flush, so one round trip tells.
        """
        self.nc.flush(deadline)
        err = self.nc.last_error
        # The error's text is lower-cased (nats-py's text), the subjects are not: compare
        # without case (an inbox differing only in case from ours is not in use).
        text = str(err).lower()
        if err is not earlier and isinstance(err, PermissionsError) and (subject.lower() in text
                                                                        or inbox.lower() in text):
            raise PermissionsError(f"the server refused the monitoring request {subject}: {err}") from err

    @staticmethod
    def _decode(data: bytes, kind: str, type_: type[T], elapsed: float) -> ServerReply[T]:
        try:
            doc = msgspec.json.decode(data)
        except msgspec.DecodeError as exc:
            raise MonitorResponseError(f"invalid {kind or 'PING'} answer: {data[:100]!r}") from exc
        if not isinstance(doc, dict) or not isinstance(doc.get("server"), dict):
            raise MonitorResponseError(f"invalid {kind or 'PING'} answer: {data[:100]!r}")
        identity = decode_as(doc["server"], ServerIdentity)
        error = doc.get("error")
        if error:
            if isinstance(error, dict):
                raise MonitorError(str(error.get("description", "")), error.get("code"), identity.name)
            raise MonitorError(str(error), None, identity.name)
        # STATSZ (and the bare PING) answer under "statsz" instead of "data".
        body = doc.get("data", doc.get("statsz"))
        if body is None:
            raise MonitorResponseError(f"a {kind or 'PING'} answer without data from {identity.name}: {data[:100]!r}")
        return ServerReply(server=identity, data=decode_as(body, type_), elapsed=elapsed)

    def _nobody_answered(self, subject: str, server: str | None) -> Exception:
        if server is not None:
            # A wrong server id and a user outside the system account look the same; the
            # gathered PING tells them apart.
            try:
                with self.nc.request_many("$SYS.REQ.SERVER.PING", b"", timeout=self.timeout, max_messages=1) as it:
                    for _ in it:
                        return MonitorError(f"no server with id {server!r} answered {subject}", 404)
            except NoRespondersError:
                pass
        return SystemAccountRequiredError(
            f"nobody answered {subject}: monitoring requests need a user of the system account "
            "(system_account in the server configuration; the nats CLI's 'system' context)"
        )

    # ------------------------------------------------------------------ the kinds

    def ping(self, *, server: str | None = None, servers: ServerFilter | None = None,
             expected: int | None = None, timeout: TimeoutArg = USE_DEFAULT) -> list[ServerReply[Statsz]]:
        """Every server's statistics: the answers to ``$SYS.REQ.SERVER.PING`` (who is up).

        Args and Raises: as :meth:`request`.
        """
        # One server answers its STATSZ subject; the bare PING subject is the gathered one.
        return self.request("STATSZ" if server else "", None, Statsz, server=server, servers=servers,
                            expected=expected, timeout=timeout)

    def varz(self, *, server: str | None = None, servers: ServerFilter | None = None,
             expected: int | None = None, timeout: TimeoutArg = USE_DEFAULT) -> list[ServerReply[Varz]]:
        """Each server's general state and configuration (``VARZ``).

        Args and Raises: as :meth:`request`.
        """
        return self.request("VARZ", None, Varz, server=server, servers=servers, expected=expected, timeout=timeout)

    def connz(
        self,
        *,
        sort: str | None = None,
        auth: bool = False,
        subscriptions: bool = False,
        subscriptions_detail: bool = False,
        offset: int = 0,
        limit: int = 0,
        cid: int = 0,
        state: str = "open",
        user: str | None = None,
        account: str | None = None,
        filter_subject: str | None = None,
        mqtt_client: str | None = None,
        server: str | None = None,
        servers: ServerFilter | None = None,
        expected: int | None = None,
        timeout: TimeoutArg = USE_DEFAULT,
    ) -> list[ServerReply[Connz]]:
        """A page of each server's connections (``CONNZ``).

        Args:
            sort: order by ``"cid"``, ``"start"``, ``"subs"``, ``"pending"``, ``"msgs_to"``,
                ``"msgs_from"``, ``"bytes_to"``, ``"bytes_from"``, ``"last"``, ``"idle"``,
                ``"uptime"``, ``"stop"``, ``"reason"``, ``"rtt"`` (server default: ``cid``).
            auth: include each connection's user.
            subscriptions: include each connection's subjects; ``subscriptions_detail`` for more.
            offset, limit: the page (server default: the first 1024).
            cid: only this connection id.
            state: ``"open"``, ``"closed"`` (recently closed) or ``"all"``.
            user, account: only this user's / account's connections.
            filter_subject: only connections subscribed to this subject (with ``account``).
            mqtt_client: only this MQTT client id.
            server, servers, expected, timeout: as :meth:`request`.

        Raises:
            ValueError: an unknown ``state``. Others as :meth:`request`.
        """
        if state not in _CONN_STATES:
            raise ValueError(f"state must be one of {sorted(_CONN_STATES)}, not {state!r}")
        options = _options(sort=sort, auth=auth, subscriptions=subscriptions,
                           subscriptions_detail=subscriptions_detail, offset=offset, limit=limit, cid=cid,
                           state=_CONN_STATES[state], user=user, acc=account, filter_subject=filter_subject,
                           mqtt_client=mqtt_client)
        return self.request("CONNZ", options, Connz, server=server, servers=servers, expected=expected,
                            timeout=timeout)

    def subsz(self, *, subscriptions: bool = False, offset: int = 0, limit: int = 0, test: str | None = None,
              account: str | None = None, server: str | None = None, servers: ServerFilter | None = None,
              expected: int | None = None, timeout: TimeoutArg = USE_DEFAULT) -> list[ServerReply[Subsz]]:
        """Each server's subscription routing table (``SUBSZ``).

        Args:
            subscriptions: include the subscriptions (paged by ``offset`` and ``limit``).
            test: only the subscriptions a message on this subject would reach.
            account: only this account's subscriptions.
            server, servers, expected, timeout: as :meth:`request`.

        Raises: as :meth:`request`.
        """
        options = _options(subscriptions=subscriptions, offset=offset, limit=limit, test=test, account=account)
        return self.request("SUBSZ", options, Subsz, server=server, servers=servers, expected=expected,
                            timeout=timeout)

    def routez(self, *, subscriptions: bool = False, subscriptions_detail: bool = False,
               server: str | None = None, servers: ServerFilter | None = None, expected: int | None = None,
               timeout: TimeoutArg = USE_DEFAULT) -> list[ServerReply[Routez]]:
        """Each server's routes to the rest of its cluster (``ROUTEZ``).

        Args:
            subscriptions: include the subjects each route carries; ``subscriptions_detail`` for more.
            server, servers, expected, timeout: as :meth:`request`.

        Raises: as :meth:`request`.
        """
        options = _options(subscriptions=subscriptions, subscriptions_detail=subscriptions_detail)
        return self.request("ROUTEZ", options, Routez, server=server, servers=servers, expected=expected,
                            timeout=timeout)

    def gatewayz(self, *, accounts: bool = False, gateway_name: str | None = None, account_name: str | None = None,
                 server: str | None = None, servers: ServerFilter | None = None, expected: int | None = None,
                 timeout: TimeoutArg = USE_DEFAULT) -> list[ServerReply[Gatewayz]]:
        """Each server's gateways to other clusters (``GATEWAYZ``).

        Args:
            accounts: include the accounts' interest on each gateway.
            gateway_name: only the gateway to this cluster.
            account_name: only this account's interest.
            server, servers, expected, timeout: as :meth:`request`.

        Raises: as :meth:`request`.
        """
        options = _options(accounts=accounts, name=gateway_name, account_name=account_name)
        return self.request("GATEWAYZ", options, Gatewayz, server=server, servers=servers, expected=expected,
                            timeout=timeout)

    def leafz(self, *, subscriptions: bool = False, account: str | None = None, server: str | None = None,
              servers: ServerFilter | None = None, expected: int | None = None,
              timeout: TimeoutArg = USE_DEFAULT) -> list[ServerReply[Leafz]]:
        """Each server's leaf node connections (``LEAFZ``).

        Args:
            subscriptions: include each leaf node's subjects.
            account: only this account's leaf nodes.
            server, servers, expected, timeout: as :meth:`request`.

        Raises: as :meth:`request`.
        """
        options = _options(subscriptions=subscriptions, account=account)
        return self.request("LEAFZ", options, Leafz, server=server, servers=servers, expected=expected,
                            timeout=timeout)

    def accountz(self, *, account: str | None = None, include_unused: bool = False, server: str | None = None,
                 servers: ServerFilter | None = None, expected: int | None = None,
                 timeout: TimeoutArg = USE_DEFAULT) -> list[ServerReply[Accountz]]:
        """Each server's accounts (``ACCOUNTZ``): their names, or one account's details.

        Args:
            account: this account's details instead of the list of names.
            include_unused: list accounts with no connection too.
            server, servers, expected, timeout: as :meth:`request`.

        Raises: as :meth:`request`.
        """
        options = _options(account=account, include_unused=include_unused)
        return self.request("ACCOUNTZ", options, Accountz, server=server, servers=servers, expected=expected,
                            timeout=timeout)

    def jsz(
        self,
        *,
        account: str | None = None,
        accounts: bool = False,
        streams: bool = False,
        consumers: bool = False,
        config: bool = False,
        leader_only: bool = False,
        raft: bool = False,
        offset: int = 0,
        limit: int = 0,
        server: str | None = None,
        servers: ServerFilter | None = None,
        expected: int | None = None,
        timeout: TimeoutArg = USE_DEFAULT,
    ) -> list[ServerReply[Jsz]]:
        """Each server's JetStream state (``JSZ``).

        Args:
            account: details of this account only.
            accounts: details of every account; ``streams``, ``consumers`` and ``config``
                add their streams, consumers and configurations.
            leader_only: only the meta leader answers.
            raft: include the Raft groups.
            offset, limit: page the accounts.
            server, servers, expected, timeout: as :meth:`request`.

        Raises: as :meth:`request`.
        """
        options = _options(account=account, accounts=accounts, streams=streams, consumer=consumers, config=config,
                           leader_only=leader_only, raft=raft, offset=offset, limit=limit)
        return self.request("JSZ", options, Jsz, server=server, servers=servers, expected=expected, timeout=timeout)

    def healthz(
        self,
        *,
        js_enabled_only: bool = False,
        js_server_only: bool = False,
        account: str | None = None,
        stream: str | None = None,
        consumer: str | None = None,
        details: bool = False,
        server: str | None = None,
        servers: ServerFilter | None = None,
        expected: int | None = None,
        timeout: TimeoutArg = USE_DEFAULT,
    ) -> list[ServerReply[Healthz]]:
        """Each server's health (``HEALTHZ``): the check behind ``/healthz``.

        Args:
            js_enabled_only: only check that JetStream is enabled.
            js_server_only: only check the server itself, not its JetStream assets.
            account, stream, consumer: check this account, stream or consumer (a stream
                or consumer needs its ``account``).
            details: list every problem found.
            server, servers, expected, timeout: as :meth:`request`.

        Raises: as :meth:`request`.
        """
        options = {k.replace("_", "-") if k.startswith("js_") else k: v for k, v in _options(
            js_enabled_only=js_enabled_only, js_server_only=js_server_only, account=account, stream=stream,
            consumer=consumer, details=details).items()}
        return self.request("HEALTHZ", options, Healthz, server=server, servers=servers, expected=expected,
                            timeout=timeout)

    def statsz(self, *, server: str | None = None, servers: ServerFilter | None = None,
               expected: int | None = None, timeout: TimeoutArg = USE_DEFAULT) -> list[ServerReply[Statsz]]:
        """Each server's statistics (``STATSZ``).

        Args and Raises: as :meth:`request`.
        """
        return self.request("STATSZ", None, Statsz, server=server, servers=servers, expected=expected,
                            timeout=timeout)

    def account_jetstream(self, account: str, *, streams: bool = False, consumers: bool = False,
                          config: bool = False, expected: int | None = None,
                          timeout: TimeoutArg = USE_DEFAULT) -> list[ServerReply[AccountJetStream]]:
        """One account's JetStream use, from each server that has it (``$SYS.REQ.ACCOUNT.<account>.JSZ``).

        Args:
            account: the account's name (its public key with JWT accounts).
            streams, consumers, config: include its streams, their consumers, their configurations.
            expected, timeout: as :meth:`request`.

        Raises: as :meth:`request`.
        """
        options = _options(streams=streams, consumer=consumers, config=config)
        return self.request("JSZ", options, AccountJetStream, expected=expected, timeout=timeout,
                            subject=f"$SYS.REQ.ACCOUNT.{account}.JSZ")
