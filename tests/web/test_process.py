"""ProcessClient: one client per process, kept across a fork by the child as its own connection."""

from __future__ import annotations

import os
import threading
import warnings
from typing import Any

import pytest

from natsjs_sync.contrib import process
from natsjs_sync.contrib.process import ProcessClient, SettingsError, import_callable, parse_settings
from natsjs_sync.testing import NatsServer

from ..conftest import wait_until
from ..fork_kit import run_in_child


def test_a_forked_child_uses_its_own_connection_without_any_hook(nats_server: NatsServer) -> None:
    """The Celery/multiprocessing case: the parent made the client before the pool forked."""
    holder = ProcessClient(nats_server.url)
    parent = holder()
    sub = parent.subscribe("from.child")
    parent.flush()
    read, write = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # 3.12+: fork() of a process with threads
        pid = os.fork()
    if pid == 0:  # the child: no pytest from here on, only os._exit
        code = 1
        try:
            nc = holder()
            nc.flush(timeout=10)  # connects: until then client_id is still the parent's
            nc.publish("from.child", str(nc.client_id).encode())
            nc.flush(timeout=10)
            os.write(write, b"ok")
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    try:
        msg = sub.next_msg(timeout=30)
        child_cid = int(msg.data)
        assert child_cid != parent.client_id  # the child's own connection, not the parent's
        assert os.read(read, 2) == b"ok"
        statuses: list[int] = []

        def reaped() -> bool:  # another process's exit offers nothing to wait on: polled
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                statuses.append(status)
            return bool(done)

        if not wait_until(reaped, timeout=30, interval=0.1):
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child did not exit within 30 s")
        assert os.waitstatus_to_exitcode(statuses[0]) == 0
        assert holder() is parent and parent.is_connected  # the parent's connection is untouched
        parent.flush(timeout=5)
    finally:
        os.close(read)
        holder.close()


def test_the_client_is_closed_at_exit_once_registered(nats_server: NatsServer,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    registered: list[Any] = []
    monkeypatch.setattr(process.atexit, "register", registered.append)
    holder = ProcessClient(nats_server.url)
    first = holder()
    first.close()
    second = holder()  # replaced, and still one exit hook
    assert registered == [holder.close]
    registered[0]()
    assert second.is_closed and holder.current is None


def test_settings_and_dotted_paths() -> None:
    s = parse_settings({"servers": "nats://a:4222, tls://b:4222", "options": {"name": "x"},
                        "on_connect": "natsjs_sync.health.check_health"})
    assert s.servers == ("nats://a:4222", "tls://b:4222") and s.options == {"name": "x"}
    assert s.on_connect == ("natsjs_sync.health.check_health",)
    assert parse_settings(None).servers is None
    assert import_callable("natsjs_sync.health:check_health") is import_callable("natsjs_sync.health.check_health")
    with pytest.raises(TypeError):
        import_callable("natsjs_sync.health.DEFAULT_TIMEOUT")
    with pytest.raises(SettingsError) as info:
        parse_settings({"servers": [], "workers": [42], "health": []})  # type: ignore[list-item]
    assert len(info.value.problems) == 3, info.value.problems
    with pytest.raises(SettingsError) as info:
        parse_settings({"options": "name=x", "health": {"timeout": 1, "stream": ["S"]}})
    assert info.value.problems == [  # the setting named as written; the options' value not shown
        "NATS['options'] is a dict of natsjs_sync.connect() keywords, not str",
        "NATS['health']['stream']: check_health() takes no keyword 'stream'"]
    with pytest.raises(SettingsError) as info:
        parse_settings({"options": "name=x"}, framework="flask")
    assert info.value.problems == ["NATS_OPTIONS is a dict of natsjs_sync.connect() keywords, not str"]


def test_process_client_checks_its_arguments_as_the_settings_are_checked() -> None:
    # Celery and scripts make the holder themselves: a bad value fails there, not at each call
    # (a TypeError from connect() escaped health() as a 500).
    for kwargs, named in (({"options": {"connect_timeout": "2s"}}, "options['connect_timeout']: "),
                          ({"health": {"max_usage": 90}}, "health['max_usage']: "),
                          ({"servers": "http://u:hunter2@h:4222"}, "servers: unsupported URL scheme 'http'")):
        with pytest.raises(SettingsError) as info:
            ProcessClient(**kwargs)
        assert info.value.problems[0].startswith(named) and "hunter2" not in str(info.value), info.value.problems
    ProcessClient("nats://a:4222,tls://b:4222", options={"connect_timeout": 2, "name": "x"},
                  health={"consumers": [("S", "c"), "S/d"], "max_usage": 0.5})


def test_a_child_forked_while_another_thread_connects_makes_its_own_client(nats_server: NatsServer) -> None:
    """gunicorn --preload or a Celery pool forking while a thread of the parent holds the
    holder's lock in the middle of connecting: the child must not wait on that lock for ever."""
    parent_pid = os.getpid()
    inside, release = threading.Event(), threading.Event()

    def hold_in_parent(nc: Any) -> None:
        if os.getpid() == parent_pid:  # in the child the same callable runs for the child's client
            inside.set()
            release.wait(60)

    holder = ProcessClient(nats_server.url, on_connect=[hold_in_parent])
    connecting = threading.Thread(target=holder, name="connecting")
    connecting.start()

    def child() -> dict[str, object]:
        made: list[int] = []
        done = threading.Event()

        def use() -> None:
            nc = holder()
            nc.flush(timeout=10)  # connects: until then client_id is still the parent's
            made.append(nc.client_id)
            done.set()

        threading.Thread(target=use, daemon=True).start()
        return {"connected": done.wait(20), "client_id": made[0] if made else None}

    try:
        assert inside.wait(30)  # the parent's lock is held, mid-connect
        result = run_in_child(child)
    finally:
        release.set()
        connecting.join(30)
    try:
        assert result["connected"] is True, "the child hung on the lock its parent held when it forked"
        assert result["client_id"] != holder().client_id  # a connection of its own
        assert not connecting.is_alive()
    finally:
        holder.close()
