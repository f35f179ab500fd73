"""A JetStream workload for the fault battery, and its checks against the server.

Publishers (sync from several threads, async in windows) publish with message
ids and publish again until a message is acknowledged, so an unknown outcome
is never a loss and never a duplicate. Consumers of each kind (``messages()``,
``consume()``, ``fetch()``, an ordered consumer) record what they processed.
Every client call is timed against its own timeout.

After the faults, :meth:`Workload.verify` reads the stream back with a fresh
client (the server's view) and checks: no acknowledged publish lost, no
message stored twice, every stored message processed at least once by each
consumer, and the ordered consumer saw every sequence exactly once, in order.
:meth:`Workload.resume_times` publishes a marker and times how long after the
server came back each consumer had it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import natsjs_sync as nats
from natsjs_sync.jetstream import JetStream, PubAck

from ..recovery import CallTimer

CALL_MARGIN = 6.0  # seconds a call may outlive its timeout (a loaded machine), never the bug's 30


class _Thread(threading.Thread):
    def __init__(self, target: Callable[[], None], name: str):
        super().__init__(target=self._guarded, name=name, daemon=True)
        self._fn = target
        self.failure: BaseException | None = None

    def _guarded(self) -> None:
        try:
            self._fn()
        except BaseException as exc:  # reported by verify(), not lost in a thread
            self.failure = exc


class Workload:
    """Publishers and consumers of one stream on one client.

    Args:
        js: the context to work through (its client reconnects on its own).
        stream: the stream's name; ``subject`` must be captured by it.
        publishers, async_publishers: how many threads publish each way.
        consumers: which consumer kinds run: ``messages``, ``consume``, ``fetch``, ``ordered``.
        rate: pause (seconds) between a publisher's publishes, to keep consumers caught up.
        pull_expires: ``expires`` of the ``messages`` and ``consume`` pulls (their idle
            heartbeat is half of it, the default rule); a pull request the server drops
            without a status message is noticed after two missed heartbeats.
    """

    def __init__(self, js: JetStream, stream: str, subject: str, *, publishers: int = 3, async_publishers: int = 1,
                 consumers: tuple[str, ...] = ("messages", "consume", "fetch", "ordered"), rate: float = 0.002,
                 ack_wait: float = 4.0, pull_expires: float = 30.0):
        self.js = js
        self.stream = stream
        self.subject = subject
        self.timer = CallTimer()
        self._stop_publishing = threading.Event()
        self._stop_consuming = threading.Event()
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._rate = rate
        self._pull_expires = pull_expires
        self.acked: dict[bytes, int] = {}  # payload -> stream sequence of its ack
        self.retries = 0
        self.processed: dict[str, dict[bytes, float]] = {kind: {} for kind in consumers}  # first time seen
        self.deliveries: dict[str, int] = dict.fromkeys(consumers, 0)
        self.ordered_seqs: list[int] = []
        self.consumer_errors: dict[str, list[str]] = {kind: [] for kind in consumers}
        self._threads: list[_Thread] = []
        self._stoppers: list[Callable[[], None]] = []
        for i in range(publishers):
            self._threads.append(_Thread(lambda i=i: self._publish_sync(i), f"test-pub-{i}"))
        for i in range(async_publishers):
            self._threads.append(_Thread(lambda i=i: self._publish_async(i), f"test-apub-{i}"))
        self._publishers = list(self._threads)
        for kind in consumers:
            self._start_consumer(kind, ack_wait)
        for t in self._threads:
            t.start()

    # ------------------------------------------------------------------ publishing

    def _record_ack(self, payload: bytes, ack: PubAck) -> None:
        with self._cond:
            self.acked[payload] = ack.seq
            self._cond.notify_all()

    def _publish_once(self, payload: bytes) -> PubAck:
        return self.timer.call("publish", 2.0, lambda: self.js.publish(
            self.subject, payload, msg_id=payload.decode(), timeout=2.0))

    def _publish_sync(self, i: int) -> None:
        n = 0
        while not self._stop_publishing.is_set() and n < 1_000_000:
            payload = b"s%d-%d" % (i, n)
            for _ in range(10_000):  # until acknowledged: a retry is de-duplicated by its id
                try:
                    self._record_ack(payload, self._publish_once(payload))
                    break
                except nats.NatsError:
                    with self._lock:
                        self.retries += 1
                    if self._stop_publishing.wait(0.01):
                        return
            n += 1
            if self._rate:
                self._stop_publishing.wait(self._rate)

    def _publish_async(self, i: int) -> None:
        n = 0
        while not self._stop_publishing.is_set() and n < 1_000_000:
            window = [b"a%d-%d" % (i, n + k) for k in range(20)]
            n += len(window)
            pending = window
            for _ in range(10_000):
                futures: list[tuple[bytes, Future[PubAck]]] = []
                for payload in pending:
                    try:
                        futures.append((payload, self.js.publish_async(self.subject, payload, msg_id=payload.decode())))
                    except nats.NatsError:
                        pass  # not sent: stays pending
                failed = [p for p in pending if p not in dict(futures)]
                for payload, fut in futures:
                    try:
                        self._record_ack(payload, self._settled(fut))
                    except nats.NatsError:
                        failed.append(payload)
                if not failed:
                    break
                with self._lock:
                    self.retries += len(failed)
                pending = failed
                if self._stop_publishing.wait(0.05):
                    return
            if self._rate:
                self._stop_publishing.wait(self._rate * 10)

    def _settled(self, fut: Future[PubAck]) -> PubAck:
        """The future's PubAck, or its error (a NatsError). A future settles by
        itself: an ack, an error, or its own ack timeout, which each retry after
        "no responders" starts again (up to three ack timeouts here). So a wait
        that ends first (the plain TimeoutError of Future.result) waits again,
        bounded by that longest life and one more for load."""
        for _ in range(4):
            try:
                return self.timer.call("publish_async result", 10.0, lambda: fut.result(timeout=10.0))
            except nats.NatsError:
                raise
            except TimeoutError:  # concurrent.futures': not settled yet
                continue
        return fut.result(timeout=0)  # never settled: the TimeoutError fails the workload

    # ------------------------------------------------------------------ consuming

    def _seen(self, kind: str, payload: bytes) -> None:
        with self._cond:
            self.deliveries[kind] += 1
            self.processed[kind].setdefault(payload, time.monotonic())
            self._cond.notify_all()

    def _error(self, kind: str, exc: BaseException) -> None:
        with self._lock:
            self.consumer_errors[kind].append(f"{type(exc).__name__}: {exc}")

    def _start_consumer(self, kind: str, ack_wait: float) -> None:
        js = self.js
        if kind == "ordered":
            oc = js.ordered_consumer(self.stream)
            it = oc.messages()
            self._stoppers.append(it.stop)

            def read_ordered() -> None:
                while not self._stop_consuming.is_set():
                    try:
                        msg = it.next(timeout=1.0)
                    except nats.TimeoutError:
                        continue
                    except nats.BadSubscriptionError:
                        return
                    except nats.NatsError as exc:
                        self._error(kind, exc)
                        continue
                    with self._lock:
                        self.ordered_seqs.append(msg.metadata.sequence.stream)
                    self._seen(kind, msg.data)

            self._threads.append(_Thread(read_ordered, "test-ordered"))
            return
        cons = js.create_or_update_consumer(self.stream, durable_name=kind, ack_policy="explicit", ack_wait=ack_wait,
                                            timeout=10)
        if kind == "messages":
            it = cons.messages(expires=self._pull_expires)
            self._stoppers.append(it.stop)

            def read_messages() -> None:
                while not self._stop_consuming.is_set():
                    try:
                        msg = it.next(timeout=1.0)
                    except nats.TimeoutError:
                        continue
                    except nats.BadSubscriptionError:
                        return
                    except nats.NatsError as exc:
                        self._error(kind, exc)
                        continue
                    self._seen(kind, msg.data)
                    self._ack(kind, msg)

            self._threads.append(_Thread(read_messages, "test-messages"))
        elif kind == "consume":
            def handle(msg: nats.Msg) -> None:
                self._seen(kind, msg.data)
                self._ack(kind, msg)

            ctx = cons.consume(handle, expires=self._pull_expires, error_cb=lambda exc: self._error(kind, exc))
            self._stoppers.append(ctx.stop)
        elif kind == "fetch":
            def read_fetch() -> None:
                while not self._stop_consuming.is_set():
                    try:
                        batch = self.timer.call("fetch", 1.0, lambda: list(cons.fetch(100, max_wait=1.0)))
                    except nats.NatsError as exc:
                        self._error(kind, exc)
                        self._stop_consuming.wait(0.05)
                        continue
                    for msg in batch:
                        self._seen(kind, msg.data)
                        self._ack(kind, msg)

            self._threads.append(_Thread(read_fetch, "test-fetch"))
        else:
            raise ValueError(kind)

    def _ack(self, kind: str, msg: nats.Msg) -> None:
        try:
            msg.ack()
        except nats.NatsError as exc:  # not acknowledged: it comes again after ack_wait
            self._error(kind, exc)

    # ------------------------------------------------------------------ driving and checking

    def wait_acked(self, count: int, timeout: float) -> bool:
        """Wait until ``count`` more publishes than now are acknowledged."""
        with self._cond:
            target = len(self.acked) + count
            return self._cond.wait_for(lambda: len(self.acked) >= target, timeout)

    def resume_times(self, back: float, timeout: float, label: str) -> dict[str, float | None]:
        """Publish a marker now; seconds from ``back`` to each consumer having it."""
        marker = f"marker-{label}".encode()
        deadline = time.monotonic() + 20
        while True:
            try:
                self._record_ack(marker, self.js.publish(self.subject, marker, msg_id=marker.decode(), timeout=2.0))
                break
            except nats.NatsError:
                if time.monotonic() > deadline:
                    raise
        with self._cond:
            self._cond.wait_for(lambda: all(marker in seen for seen in self.processed.values()),
                                max(0.0, back + timeout - time.monotonic()))
            return {kind: (seen[marker] - back if marker in seen else None) for kind, seen in self.processed.items()}

    def stop_publishing(self) -> None:
        self._stop_publishing.set()
        for t in self._publishers:
            t.join(30)

    def stop(self) -> None:
        self.stop_publishing()
        self._stop_consuming.set()
        for stop in self._stoppers:
            try:
                stop()
            except nats.NatsError:
                pass
        for t in self._threads:
            t.join(30)

    def stored(self, url: str | list[str]) -> dict[int, bytes]:
        """The stream as the server has it, read with a fresh client: {sequence: payload}."""
        with nats.connect(url, name="verifier") as nc:
            js = nc.jetstream(timeout=10)
            last = js.stream(self.stream).info().state.last_seq
            out: dict[int, bytes] = {}
            if last == 0:
                return out
            it = js.ordered_consumer(self.stream).messages()
            try:
                while len(out) < last:
                    msg = it.next(timeout=10)
                    out[msg.metadata.sequence.stream] = msg.data
                    if msg.metadata.sequence.stream >= last:
                        break
            finally:
                it.stop()
            return out

    def verify(self, url: str | list[str], catch_up: float = 60.0) -> dict[str, Any]:
        """Stop publishing, let consumers catch up, stop them and check everything."""
        self.stop_publishing()
        stored = self.stored(url)
        payloads = set(stored.values())
        with self._cond:
            self._cond.wait_for(lambda: all(payloads <= set(seen) for seen in self.processed.values()), catch_up)
        self.stop()
        failures = [f"{t.name}: {t.failure!r}" for t in self._threads if t.failure is not None]
        assert not failures, failures
        lost = {p: s for p, s in self.acked.items() if stored.get(s) != p}
        assert not lost, f"{len(lost)} acknowledged publishes are not in the stream as acked: {list(lost)[:10]}"
        assert len(payloads) == len(stored), "a message was stored twice"
        for kind, seen in self.processed.items():
            missing = payloads - set(seen)
            assert not missing, f"{kind}: {len(missing)} stored messages never processed: {sorted(missing)[:10]}"
        if "ordered" in self.processed:
            expected = sorted(stored)
            first_diff = next((i for i, (a, b) in enumerate(zip(self.ordered_seqs, expected, strict=False)) if a != b),
                              min(len(self.ordered_seqs), len(expected)))
            assert self.ordered_seqs == expected, \
                f"ordered: not every sequence exactly once in order (first difference at index {first_diff}: " \
                f"{self.ordered_seqs[first_diff:first_diff + 5]} instead of {expected[first_diff:first_diff + 5]})"
        overruns = self.timer.overruns(CALL_MARGIN)
        assert not overruns, f"calls past their deadline (overrun, elapsed, call): {overruns[:5]}"
        return {"stored": len(stored), "acked": len(self.acked), "retries": self.retries,
                "redelivered": {k: self.deliveries[k] - len(v) for k, v in self.processed.items()},
                "consumer_errors": {k: len(v) for k, v in self.consumer_errors.items()}}
