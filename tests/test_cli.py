"""The natsjs-sync command line, run as a user runs it."""

from __future__ import annotations

import argparse
import io
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import natsjs_sync
from natsjs_sync.cli import main
from natsjs_sync.testing import FaultProxy, NatsServer

REPO = Path(__file__).resolve().parents[1]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def contexts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty nats CLI configuration of the test's own (``XDG_CONFIG_HOME``, ``HOME``), and no
    server named by the environment."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / ".config"))
    for name in ("NATS_URL", "NATS_CONTEXT"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / ".config"


@pytest.fixture
def auth_server() -> Iterator[NatsServer]:
    """A server that takes only the user ``app`` (password ``s3cret``): a context's credentials are needed."""
    with NatsServer(user="app", password="s3cret") as server:
        yield server


def test_demo_runs_on_its_own_server_whatever_the_environment_names(contexts: Path,
                                                                     nats_server: NatsServer) -> None:
    # A NATS user's machine: a selected context, $NATS_CONTEXT and $NATS_URL all lead to a server of
    # theirs (here the fixture's). The demo starts its own, says so, and sends nothing to theirs.
    from natsjs_sync import natscontext

    natscontext.save("work", url=nats_server.url)
    natscontext.select("work")
    env = {**os.environ, "PYTHONPATH": str(REPO), "NATS_URL": nats_server.url, "NATS_CONTEXT": "work"}
    with natsjs_sync.connect(nats_server.url) as theirs:
        watch = theirs.subscribe("demo.>")
        theirs.flush()
        proc = subprocess.run([sys.executable, "-m", "natsjs_sync", "demo"], capture_output=True, text=True,
                              timeout=60, env=env, cwd=REPO)
        assert proc.returncode == 0, proc.stderr
        out = proc.stdout
        started = out.splitlines()[0]
        assert started.startswith("started an embedded nats-server nats://127.0.0.1:"), out
        embedded_url = started.split()[4]
        assert embedded_url != nats_server.url
        assert f"connected to {embedded_url} " in out
        assert "received demo.greeting.2: hello #2" in out
        assert "reply 'pong: ping'" in out
        assert "$NATS_URL" in proc.stderr and "$NATS_CONTEXT" in proc.stderr and "'work'" in proc.stderr
        assert "Traceback" not in proc.stderr
        theirs.flush()  # anything the demo had sent to this server would be here by now
        assert watch.pending_msgs == 0


def test_demo_and_bench_use_the_context_named_with_its_credentials(capsys: pytest.CaptureFixture[str],
                                                                    contexts: Path, auth_server: NatsServer) -> None:
    from natsjs_sync import natscontext

    natscontext.save("work", url=auth_server.url, user="app", password="s3cret")
    with natsjs_sync.connect(auth_server.url, user="app", password="s3cret") as nc:
        demo = nc.subscribe("demo.greeting.*")
        bench = nc.subscribe("bench.pub", pending_msgs_limit=1000)
        nc.flush()
        code, out, err = run(capsys, "demo", "--context", "work")
        assert code == 0, err
        assert out.splitlines()[0] == f"using the server given by NATS context 'work': {auth_server.url}"
        assert f"connected to {auth_server.url} " in out and "embedded" not in out
        assert [demo.next_msg(timeout=10).data for _ in range(3)] == [b"hello #0", b"hello #1", b"hello #2"]
        # Given before the command name, as every global option may be.
        code, out, err = run(capsys, "--context", "work", "bench", "pub", "--msgs", "200")
        assert code == 0, err
        assert out.splitlines()[0] == f"using the server given by NATS context 'work': {auth_server.url}"
        assert len([bench.next_msg(timeout=10) for _ in range(200)]) == 200  # each within 10 s, or TimeoutError


def test_global_options_work_before_and_after_the_command(capsys: pytest.CaptureFixture[str], contexts: Path,
                                                          auth_server: NatsServer) -> None:
    from natsjs_sync import natscontext

    natscontext.save("work", url=auth_server.url, user="app", password="s3cret")
    with natsjs_sync.connect(auth_server.url, user="app", password="s3cret") as nc:
        sub = nc.subscribe("g.>")
        nc.flush()
        for argv in (["pub", "--context", "work", "g.after", "one"], ["--context", "work", "pub", "g.before", "two"],
                     ["pub", "g.end", "three", "--context", "work"],
                     # a global option after the command wins over the same one before it
                     ["--context", "nosuch", "pub", "g.both", "four", "--context", "work"]):
            code, _, err = run(capsys, *argv)
            assert code == 0, (argv, err)
        got = [sub.next_msg(timeout=10) for _ in range(4)]
        assert [(m.subject, m.data) for m in got] == [("g.after", b"one"), ("g.before", b"two"),
                                                       ("g.end", b"three"), ("g.both", b"four")]
    # Three levels down, after the check's own options.
    code, out, _ = run(capsys, "server", "check", "connection", "--user", "app", "--password", "s3cret",
                       "--server", auth_server.url, "--rtt-warn", "10s", "--rtt-critical", "20s",
                       "--connect-warn", "10s", "--connect-critical", "20s", "--req-warn", "10s",
                       "--req-critical", "20s")
    assert code == 0 and out.startswith("OK Connection "), out


def _parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ("natsjs-sync",)
             ) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every parser of the command line, by command (argparse's own records: what a user reaches)."""
    yield " ".join(path), parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _parsers(child, (*path, name))


def test_every_command_lists_the_global_options_and_explains_every_argument() -> None:
    from natsjs_sync.cli import build_parser

    parsers = dict(_parsers(build_parser()))
    assert {"natsjs-sync pub", "natsjs-sync server check stream", "natsjs-sync context save"} <= set(parsers)
    unexplained = []
    for path, parser in parsers.items():
        usage = parser.format_help()
        assert "--context NAME" in usage and "--server URL" in usage, path
        for action in parser._actions:
            if not isinstance(action, argparse._SubParsersAction) and not action.help:
                unexplained.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
    assert not unexplained, unexplained


@pytest.mark.parametrize("argv", [["typo"], [], ["stream", "--stream", "S", "--bogus"],
                                  ["stream", "--stream", "S", "--timeout", "soon"], ["consumer", "--stream", "S"],
                                  ["--bogus", "meta"], ["meta", "--context"]])
def test_server_check_usage_errors_are_unknown_with_a_status_line(argv: list[str]) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "natsjs_sync", "server", "check", *argv], capture_output=True,
                          text=True, timeout=60, env=env, cwd=REPO)
    assert proc.returncode == 3, (proc.stdout, proc.stderr)
    (line,) = proc.stdout.splitlines()
    assert line.startswith("UNKNOWN ") and "Traceback" not in proc.stderr


def test_server_restarts_at_once_on_a_port_its_clients_just_left(tmp_path: Path) -> None:
    # What a stopped server with clients leaves behind: connections in TIME_WAIT on its port, for a
    # minute. The side that closes first keeps TIME_WAIT; here that is the listening side, which sets
    # SO_REUSEADDR as nats-server (Go) does on its listener.
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port), timeout=10)
        accepted, _ = listener.accept()
        accepted.close()
        assert client.recv(1) == b""  # the listening side's FIN arrived
        client.close()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with subprocess.Popen([sys.executable, "-m", "natsjs_sync", "server", "--port", str(port), "--no-jetstream"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO) as proc:
        try:
            assert proc.stdout is not None and proc.stderr is not None
            line = proc.stdout.readline()
            assert line.startswith(f"nats-server listening on nats://127.0.0.1:{port}"), (line, proc.stderr.read())
            with natsjs_sync.connect(f"nats://127.0.0.1:{port}") as nc:
                nc.flush()
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


def test_stream_and_consumer_commands(capsys: pytest.CaptureFixture[str], nats_server: NatsServer) -> None:
    s = ("--server", nats_server.url)
    assert run(capsys, "stream", "add", "ORDERS", "--subjects", "orders.>", "--storage", "memory", *s)[0] == 0
    for i in range(3):
        assert run(capsys, "pub", "orders.new", f"order {i}", "--server", nats_server.url)[0] == 0
    code, out, _ = run(capsys, "stream", "ls", *s)
    assert code == 0 and "ORDERS" in out
    code, out, _ = run(capsys, "stream", "info", "ORDERS", *s)
    assert code == 0 and "0 messages" not in out
    code, out, _ = run(capsys, "stream", "get", "ORDERS", "2", *s)
    assert code == 0 and "order 1" in out
    assert run(capsys, "consumer", "add", "ORDERS", "proc", "--filter", "orders.new", *s)[0] == 0
    code, out, _ = run(capsys, "consumer", "ls", "ORDERS", *s)
    assert "proc" in out
    code, out, _ = run(capsys, "consumer", "next", "ORDERS", "proc", "--count", "2", *s)
    assert code == 0 and "order 0" in out and "order 1" in out
    code, out, _ = run(capsys, "consumer", "info", "ORDERS", "proc", *s)
    assert "ack floor 2" in out
    assert run(capsys, "consumer", "rm", "ORDERS", "proc", *s)[0] == 0
    code, out, _ = run(capsys, "stream", "purge", "ORDERS", *s)
    assert "purged 3" in out
    assert run(capsys, "stream", "rm", "ORDERS", *s)[0] == 0


def test_kv_commands(capsys: pytest.CaptureFixture[str], nats_server: NatsServer) -> None:
    s = ("--server", nats_server.url)
    assert run(capsys, "kv", "add", "prefs", "--history", "5", *s)[0] == 0
    assert run(capsys, "kv", "put", "prefs", "sue.color", "blue", *s)[0] == 0
    assert run(capsys, "kv", "put", "prefs", "sue.color", "green", *s)[0] == 0
    code, out, _ = run(capsys, "kv", "get", "prefs", "sue.color", *s)
    assert code == 0 and "green" in out and "revision 2" in out
    code, out, _ = run(capsys, "kv", "history", "prefs", "sue.color", *s)
    assert "blue" in out and "green" in out
    code, out, _ = run(capsys, "kv", "ls", *s)
    assert "prefs" in out
    code, out, _ = run(capsys, "kv", "ls", "prefs", *s)
    assert "sue.color" in out
    code, out, _ = run(capsys, "kv", "watch", "prefs", "--count", "1", "--timeout", "5", *s)
    assert "sue.color: green" in out
    assert run(capsys, "kv", "del", "prefs", "sue.color", *s)[0] == 0
    code, _, err = run(capsys, "kv", "get", "prefs", "sue.color", *s)
    assert code == 1 and err.startswith("error:") and "Traceback" not in err


def test_object_commands_with_progress(capsys: pytest.CaptureFixture[str], nats_server: NatsServer,
                                       tmp_path: Path) -> None:
    s = ("--server", nats_server.url)
    src = tmp_path / "model.bin"
    src.write_bytes(os.urandom(700_000))
    assert run(capsys, "obj", "add", "files", *s)[0] == 0
    code, out, err = run(capsys, "obj", "put", "files", str(src), "--progress", *s)
    assert code == 0 and "700,000 bytes" in out and "100%" in err
    code, out, _ = run(capsys, "obj", "ls", "files", *s)
    assert "model.bin" in out
    code, out, _ = run(capsys, "obj", "info", "files", "model.bin", *s)
    assert "SHA-256=" in out
    dest = tmp_path / "copy.bin"
    code, out, err = run(capsys, "obj", "get", "files", "model.bin", "-o", str(dest), "--progress", *s)
    assert code == 0 and dest.read_bytes() == src.read_bytes() and "100%" in err
    assert run(capsys, "obj", "rm", "files", "model.bin", *s)[0] == 0
    code, _, err = run(capsys, "obj", "info", "files", "model.bin", *s)
    assert code == 1 and ("not found" in err or "deleted" in err)


def test_reply_and_req(monkeypatch: pytest.MonkeyPatch, nats_server: NatsServer) -> None:
    import natsjs_sync
    from natsjs_sync import cli

    # The replier prints "answering requests on ..." once its subscription is
    # flushed to the server: wait for that line instead of retrying requests.
    ready = threading.Event()
    printed: list[str] = []
    real_print = cli._print

    def spy(*args: object) -> None:
        line = " ".join(map(str, args))
        printed.append(line)
        if line.startswith("answering requests on svc.echo"):
            ready.set()
        real_print(*args)

    monkeypatch.setattr(cli, "_print", spy)
    t = threading.Thread(target=main, args=(["reply", "svc.echo", "--count", "1", "--timeout", "30",
                                             "--server", nats_server.url],))
    t.start()
    try:
        assert ready.wait(30), printed
        with natsjs_sync.connect(nats_server.url) as nc:
            assert nc.request("svc.echo", b"hi", timeout=10).data == b"hi"
    finally:
        t.join(30)
    assert not t.is_alive()
    assert any(line.startswith("[#1] answered a request on svc.echo") for line in printed)


def test_bench_with_chart(capsys: pytest.CaptureFixture[str], nats_server: NatsServer, tmp_path: Path) -> None:
    png = tmp_path / "bench.png"
    code, out, _ = run(capsys, "bench", "js-pub-async", "--msgs", "2000", "--png", str(png),
                       "--server", nats_server.url)
    assert code == 0 and "js-pub-async" in out
    assert png.read_bytes().startswith(b"\x89PNG")
    from natsjs_sync.cli.bench import write_bar_png

    write_bar_png(str(tmp_path / "plain.png"), [3.0, 1.0, 2.0])
    assert (tmp_path / "plain.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_user_mistakes_give_messages_not_tracebacks(capsys: pytest.CaptureFixture[str],
                                                    nats_server: NatsServer, monkeypatch: pytest.MonkeyPatch
                                                    ) -> None:
    code, _, err = run(capsys, "stream", "info", "NOPE", "--server", nats_server.url)
    assert code == 1 and "error:" in err and "Traceback" not in err
    code, _, err = run(capsys, "kv", "put", "bad bucket", "k", "v", "--server", nats_server.url)
    assert code == 1 and "invalid bucket name" in err
    monkeypatch.delenv("NATS_URL", raising=False)
    with pytest.raises(SystemExit, match="no server given"):
        main(["stream", "ls"])
    code, _, err = run(capsys, "pub", "x", "y", "--server", "nats://127.0.0.1:1")
    assert code == 1 and "error:" in err


class _Lines:
    """What a command prints, with a wait for a line (commands run on a thread)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        from natsjs_sync import cli

        self.lines: list[str] = []
        self._cond = threading.Condition()
        real_print, real_note = cli._print, cli._note

        def spy(real: Any) -> Any:
            def wrapped(*args: object) -> None:
                with self._cond:
                    self.lines.append(" ".join(map(str, args)))
                    self._cond.notify_all()
                real(*args)
            return wrapped

        monkeypatch.setattr(cli, "_print", spy(real_print))
        monkeypatch.setattr(cli, "_note", spy(real_note))

    def wait_for(self, prefix: str, timeout: float = 30.0) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: any(line.startswith(prefix) for line in self.lines), timeout)


def test_pub_reads_stdin_and_sends_headers_sub_shows_them(capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          nats_server: NatsServer,
                                                          nats_fault_proxy: FaultProxy) -> None:
    printed = _Lines(monkeypatch)
    t = threading.Thread(target=main, args=(["sub", "cli.>", "--count", "3", "--timeout", "60",
                                             "--server", nats_fault_proxy.url],))
    t.start()
    try:
        assert printed.wait_for("listening on cli.>")
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"from stdin")))
        assert main(["pub", "cli.text", "-H", "Order-Id: 7", "-H", "Tag=a", "--server", nats_server.url]) == 0
        with natsjs_sync.connect(nats_server.url) as nc:
            nc.publish("cli.bin", bytes(range(200)))
            assert printed.wait_for("[#2]")
            nats_fault_proxy.cut()  # the subscriber's connection breaks and comes back
            assert printed.wait_for("-- reconnected")
            # Reconnected means the subscription was sent again, not that the server (behind the proxy)
            # has processed it: this publisher's direct connection can overtake it. Publish until it
            # arrives (bounded); the subscriber stops at its third message.
            for _ in range(60):
                nc.publish("cli.last", b"bye")
                if printed.wait_for("[#3]", timeout=0.5):
                    break
    finally:
        t.join(60)
    assert not t.is_alive()
    out = "\n".join(printed.lines)
    assert "[#1] cli.text: from stdin" in out and "    Order-Id: 7" in out and "    Tag: a" in out
    assert "[#2] cli.bin: <200 bytes, binary> \\x00\\x01\\x02" in out
    assert printed.lines.count("-- disconnected; reconnecting ...") == 1
    assert printed.lines.count("-- reconnected") == 1
    assert "[#3] cli.last: bye" in out


def test_req_with_header_and_raw_reply(capsysbinary: pytest.CaptureFixture[bytes], nats_server: NatsServer) -> None:
    with natsjs_sync.connect(nats_server.url) as nc:
        nc.subscribe("cli.svc", cb=lambda m: m.respond(m.headers["Op"].encode() + b"\xff"))
        nc.flush()
        assert main(["req", "cli.svc", "x", "-H", "Op: sum", "--raw", "--server", nats_server.url]) == 0
        assert capsysbinary.readouterr().out == b"sum\xff"
        assert main(["req", "cli.svc", "x", "-H", "no separator", "--server", nats_server.url]) == 2
        assert b"bad --header 'no separator'" in capsysbinary.readouterr().err


def test_obj_get_refuses_to_overwrite_and_writes_stdout(capsys: pytest.CaptureFixture[str],
                                                        nats_server: NatsServer, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    s = ("--server", nats_server.url)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("shared notes\n")
    assert run(capsys, "obj", "add", "docs", *s)[0] == 0
    assert run(capsys, "obj", "put", "docs", "notes.txt", *s)[0] == 0
    (tmp_path / "notes.txt").write_text("my local edits\n")
    with pytest.raises(SystemExit, match=r"notes\.txt exists: pass --force"):
        main(["obj", "get", "docs", "notes.txt", *s])
    assert (tmp_path / "notes.txt").read_text() == "my local edits\n"
    code, out, err = run(capsys, "obj", "get", "docs", "notes.txt", "-o", "-", *s)
    assert code == 0 and out == "shared notes\n" and "to stdout" in err
    assert not (tmp_path / "-").exists()
    assert run(capsys, "obj", "get", "docs", "notes.txt", "--force", *s)[0] == 0
    assert (tmp_path / "notes.txt").read_text() == "shared notes\n"


def test_a_stopped_obj_get_leaves_no_truncated_file(nats_server: NatsServer, tmp_path: Path) -> None:
    source = tmp_path / "big.bin"
    source.write_bytes(os.urandom(8 << 20))
    assert main(["obj", "add", "files", "--server", nats_server.url]) == 0
    assert main(["obj", "put", "files", str(source), "--name", "big.bin", "--server", nats_server.url]) == 0
    target = tmp_path / "copy.bin"
    target.write_bytes(b"the copy from yesterday")  # replaced only by a whole, verified object
    with FaultProxy(nats_server.url) as proxy:
        proxy.trickle(chunk_size=4096, pause=0.005)  # 8 MiB take many seconds now
        proc = _cli("obj", "get", "files", "big.bin", "-o", str(target), "--force", "--progress",
                    "--server", proxy.url, home=tmp_path)
        try:
            assert proc.stderr is not None
            assert os.read(proc.stderr.fileno(), 200).startswith(b"\rget big.bin ["), "no transfer under way"
            proxy.blackhole()  # and it never ends
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(60) == 143
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=30)
    assert target.read_bytes() == b"the copy from yesterday"
    assert not list(tmp_path.glob("*.part")) and not list(tmp_path.glob(".*.part"))  # the partial copy is gone


def test_service_commands_say_no_service_runs_without_claiming_they_waited(capsys: pytest.CaptureFixture[str],
                                                                           nats_server: NatsServer) -> None:
    # The server answers "no responders" at once: nobody was waited for 30 s.
    for argv in (["service", "ping"], ["service", "ping", "calc"], ["service", "info", "calc"],
                 ["service", "stats", "calc"], ["service", "info", "calc", "--json"]):
        code, out, err = run(capsys, *argv, "--timeout", "30s", "--server", nats_server.url)
        assert code == 1 and out.strip() == ("[]" if "--json" in argv else ""), (argv, out)
        assert err.endswith("did not answer: none is running (no responders)\n") or \
            err == "error: no service answered: none is running (no responders)\n", (argv, err)


def test_kv_put_on_a_terminal_says_it_reads_stdin(capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch, nats_server: NatsServer) -> None:
    class Terminal(io.TextIOWrapper):
        def isatty(self) -> bool:
            return True

    s = ("--server", nats_server.url)
    assert run(capsys, "kv", "add", "tty", *s)[0] == 0
    monkeypatch.setattr(sys, "stdin", Terminal(io.BytesIO(b"typed value")))
    code, out, err = run(capsys, "kv", "put", "tty", "k", *s)
    assert code == 0 and "reading the value from stdin" in err and "revision 1" in out
    code, out, _ = run(capsys, "kv", "get", "tty", "k", *s)
    assert "typed value" in out


def test_stream_ls_shows_a_dash_for_an_empty_stream(capsys: pytest.CaptureFixture[str],
                                                    nats_server: NatsServer) -> None:
    s = ("--server", nats_server.url)
    assert run(capsys, "stream", "add", "EMPTY", "--subjects", "empty.>", "--storage", "memory", *s)[0] == 0
    code, out, _ = run(capsys, "stream", "ls", *s)
    (line,) = [line for line in out.splitlines() if line.startswith("EMPTY")]
    assert code == 0 and line.rstrip().endswith(" -") and "0001" not in out


def test_server_command_busy_port_store_dir_and_ctrl_c(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(SystemExit, match=f"port {port} is in use"):
            main(["server", "--port", str(port)])
    store = tmp_path / "store"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with subprocess.Popen([sys.executable, "-m", "natsjs_sync", "server", "--port", str(port),
                           "--store-dir", str(store)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, env=env, cwd=REPO) as proc:
        try:
            assert proc.stdout is not None and proc.stderr is not None
            lines = [proc.stdout.readline() for _ in range(2)]  # bounded: the two start-up lines
            assert lines[0].startswith(f"nats-server listening on nats://127.0.0.1:{port}"), lines
            assert lines[1].strip() == f"JetStream data in {store.resolve()}", lines
            with natsjs_sync.connect(f"nats://127.0.0.1:{port}") as nc:
                nc.jetstream().create_key_value(bucket="kept").put("k", b"v")
            proc.send_signal(signal.SIGINT)
            assert proc.wait(30) == 130
            assert "Traceback" not in proc.stderr.read()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    assert any(store.rglob("*")), "the store directory is kept"
    # Started again on the same store, the data is there; SIGTERM (a service manager's stop) exits 0.
    with subprocess.Popen([sys.executable, "-m", "natsjs_sync", "server", "--port", str(port),
                           "--store-dir", str(store)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, env=env, cwd=REPO) as proc:
        try:
            assert proc.stdout is not None and proc.stderr is not None
            lines = [proc.stdout.readline() for _ in range(2)]
            assert lines[1].strip() == f"JetStream data in {store.resolve()}", lines
            with natsjs_sync.connect(f"nats://127.0.0.1:{port}") as nc:
                assert nc.jetstream().key_value("kept").get("k").value == b"v"
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0
            assert "Traceback" not in proc.stderr.read()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


def test_long_running_commands_report_errors_but_not_each_reconnect_attempt(
        capsys: pytest.CaptureFixture[str]) -> None:
    from natsjs_sync import cli

    cli._async_error(ConnectionResetError("connection reset"))
    cli._async_error(natsjs_sync.NoServersError("cannot connect to nats://127.0.0.1:1"))
    cli._async_error(natsjs_sync.SlowConsumerError("slow consumer on subject 'x'", subject="x"))
    cli._async_error(natsjs_sync.AuthorizationError("authorization violation"))
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == ["-- error: slow consumer on subject 'x'",
                                              "-- error: authorization violation"]


# ---------------------------------------------------------------------------------------------- signals


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (read from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # it ended meanwhile
        if int(stat.rpartition(")")[2].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def _ended(pidfd: int, timeout: float) -> bool:
    """Whether the process of ``pidfd`` ended within ``timeout`` seconds (no polling: the kernel
    makes the descriptor readable when it does)."""
    import select

    readable, _, _ = select.select([pidfd], [], [], timeout)
    return bool(readable)


def _cli(*argv: str, home: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NATS_URL", "NATS_CONTEXT")}
    env.update(PYTHONPATH=str(REPO), HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
    return subprocess.Popen([sys.executable, "-m", "natsjs_sync", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)


def _embedded_server_of(proc: subprocess.Popen[str]) -> int:
    """A pidfd of the nats-server the command started (its only child)."""
    (server_pid,) = _children(proc.pid)
    return os.pidfd_open(server_pid)


linux_only = pytest.mark.skipif(not sys.platform.startswith("linux") or not hasattr(os, "pidfd_open"),
                                reason="PR_SET_PDEATHSIG and pidfd are Linux's")


@linux_only
def test_an_embedded_server_ends_with_the_command_even_when_it_is_killed(tmp_path: Path) -> None:
    from natsjs_sync.testing import free_port

    proc = _cli("server", "--port", str(free_port()), "--no-jetstream", home=tmp_path)
    pidfd = -1
    try:
        assert proc.stdout is not None and proc.stderr is not None
        line = proc.stdout.readline()
        assert line.startswith("nats-server listening on"), (line, proc.stderr.read())
        pidfd = _embedded_server_of(proc)
        proc.kill()  # SIGKILL: no handler, no finally, no atexit runs
        proc.wait(30)
        assert _ended(pidfd, 30), "the nats-server outlived the command"
    finally:
        if pidfd >= 0:
            if not _ended(pidfd, 0):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            os.close(pidfd)
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)


@linux_only
@pytest.mark.parametrize(("argv", "first_line", "sig", "code"), [
    (("server", "--no-jetstream"), "nats-server listening on", signal.SIGHUP, 129),
    (("server", "--no-jetstream"), "nats-server listening on", signal.SIGTERM, 0),
    (("bench", "pub", "--msgs", "1000000000"), "started an embedded nats-server", signal.SIGTERM, 143),
    (("bench", "pub", "--msgs", "1000000000"), "started an embedded nats-server", signal.SIGHUP, 129),
])
def test_sigterm_and_sighup_stop_a_command_and_its_embedded_server(tmp_path: Path, argv: tuple[str, ...],
                                                                   first_line: str, sig: int, code: int) -> None:
    from natsjs_sync.testing import free_port

    if argv[0] == "server":
        argv = (*argv, "--port", str(free_port()))
    proc = _cli(*argv, home=tmp_path)
    pidfd = -1
    try:
        assert proc.stdout is not None and proc.stderr is not None
        line = proc.stdout.readline()
        assert line.startswith(first_line), (line, proc.stderr.read())
        pidfd = _embedded_server_of(proc)
        proc.send_signal(sig)
        assert proc.wait(60) == code
        assert _ended(pidfd, 0), "the command ended before its nats-server"
        assert "Traceback" not in proc.stderr.read()
    finally:
        if pidfd >= 0:
            if not _ended(pidfd, 0):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            os.close(pidfd)
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)


@linux_only
def test_the_server_command_fails_when_its_nats_server_dies(tmp_path: Path) -> None:
    # A crash (or the OOM killer) is no clean stop: a service manager restarts on a non-zero exit.
    from natsjs_sync.testing import free_port

    proc = _cli("server", "--port", str(free_port()), "--no-jetstream", home=tmp_path)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        line = proc.stdout.readline()
        assert line.startswith("nats-server listening on"), (line, proc.stderr.read())
        pidfd = _embedded_server_of(proc)
        try:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        finally:
            os.close(pidfd)
        assert proc.wait(60) == 1
        err = proc.stderr.read()
        assert err.startswith("error: nats-server ended by itself") and "Traceback" not in err, err
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)


def test_sigterm_stops_a_long_running_command_with_exit_code_143(tmp_path: Path, nats_server: NatsServer) -> None:
    proc = _cli("sub", "never.>", "--server", nats_server.url, home=tmp_path)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        line = proc.stdout.readline()
        assert line.strip() == "listening on never.>", (line, proc.stderr.read())
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 143
        assert "Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_pubsub_bench_prints_no_traceback_of_its_subscriber(tmp_path: Path, nats_server: NatsServer,
                                                                     sig: int) -> None:
    # The scenario's subscriber reads on a thread of its own; stopping the command closes its
    # connection under that thread, which is no error to report.
    proc = _cli("bench", "pubsub", "--msgs", "1000000000", "--server", nats_server.url, home=tmp_path)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        with natsjs_sync.connect(nats_server.url) as nc:
            flowing = nc.subscribe("bench.ps", max_msgs=1)
            nc.flush()
            line = proc.stdout.readline()
            assert line.startswith("using the server given by --server"), (line, proc.stderr.read())
            flowing.next_msg(timeout=30)  # publishing: the subscriber thread runs
        proc.send_signal(sig)
        assert proc.wait(60) == 128 + sig
        assert proc.stderr.read() == ""
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)


def _ignoring_sighup() -> None:  # a preexec_fn: the command starts as under nohup
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


@pytest.mark.parametrize(("argv", "first_line", "code"), [
    (("sub", "never.>"), "listening on never.>", 143),
    (("server", "--no-jetstream"), "nats-server listening on", 0),
])
def test_a_command_started_under_nohup_outlives_its_terminal(tmp_path: Path, nats_server: NatsServer,
                                                             argv: tuple[str, ...], first_line: str, code: int) -> None:
    from natsjs_sync.testing import free_port

    argv = (*argv, "--port", str(free_port())) if argv[0] == "server" else (*argv, "--server", nats_server.url)
    env = {k: v for k, v in os.environ.items() if k not in ("NATS_URL", "NATS_CONTEXT")}
    env.update(PYTHONPATH=str(REPO), HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / ".config"))
    proc = subprocess.Popen([sys.executable, "-m", "natsjs_sync", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=REPO, preexec_fn=_ignoring_sighup)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        line = proc.stdout.readline()
        assert line.startswith(first_line), (line, proc.stderr.read())
        proc.send_signal(signal.SIGHUP)  # the terminal closed: ignored, as nohup asked
        proc.send_signal(signal.SIGTERM)  # what stops it, in the order sent
        assert proc.wait(60) == code
        assert "Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)


def test_a_server_started_for_a_command_is_out_of_reach_of_its_terminals_ctrl_c() -> None:
    # Ctrl-C goes to the terminal's foreground process group: the command's, not its server's,
    # which the command stops itself once done with it.
    with NatsServer(jetstream=False) as server:
        assert server.pid is not None
        assert os.getpgid(server.pid) != os.getpgid(0)


# ---------------------------------------------------------------------------------------------- connection options


def test_the_nats_cli_connection_options_work_on_every_command(capsys: pytest.CaptureFixture[str], contexts: Path,
                                                              auth_server: NatsServer) -> None:
    login = ("--server", auth_server.url, "--user", "app", "--password", "s3cret")
    with natsjs_sync.connect(auth_server.url, user="app", password="s3cret") as nc:
        sub = nc.subscribe("o.>")
        nc.flush()
        # --timeout bounds the connect too: none is shorter than the library's default connect timeout.
        for argv in (["pub", "o.a", "1", *login], [*login, "pub", "o.b", "2", "--timeout", "2s"],
                     ["--timeout", "5000ms", *login, "pub", "o.c", "3"],
                     ["pub", "o.d", "4", "--timeout", "1m", *login]):
            code, _, err = run(capsys, *argv)
            assert code == 0, (argv, err)
        assert [sub.next_msg(timeout=10).data for _ in range(4)] == [b"1", b"2", b"3", b"4"]
    # The connection check's default thresholds (500 ms to connect) are for production servers, not a
    # loaded test machine: what this test checks is the login, so the thresholds are out of reach.
    generous = ("--connect-warn", "30s", "--connect-critical", "60s", "--rtt-warn", "30s", "--rtt-critical", "60s",
                "--req-warn", "30s", "--req-critical", "60s")
    for argv in (["stream", "ls"], ["kv", "ls"], ["obj", "ls"], ["server", "check", "connection", *generous],
                 ["bench", "pub", "--msgs", "10"], ["demo", "--count", "1"], ["service", "ls", "--timeout", "5s"]):
        code, out, err = run(capsys, *argv, *login)
        assert code == 0, (argv, out, err)
        assert "uthorization" not in err, (argv, err)
    code, _, err = run(capsys, "req", "o.nobody", "x", *login, "--timeout", "5s")
    assert code == 1 and "no responders" in err.lower(), err  # past the login
    code, _, err = run(capsys, "pub", "o.e", "5", "--server", auth_server.url, "--user", "app", "--password", "no")
    assert code == 1 and "authorization" in err.lower(), err


def test_user_token_nkey_and_creds_options(capsys: pytest.CaptureFixture[str], contexts: Path,
                                           tmp_path: Path) -> None:
    from natsjs_sync.nkeys import KeyPair
    from natsjs_sync.testing.jwt import Operator

    with NatsServer(jetstream=False, token="tok-3Fz") as server:
        assert run(capsys, "pub", "t.x", "y", "--server", server.url, "--user", "tok-3Fz")[0] == 0  # a token
        code, _, err = run(capsys, "pub", "t.x", "y", "--server", server.url, "--user", "tok-3Fz", "--password", "")
        assert code == 0, err  # an empty password is none ($NATS_PASSWORD set empty, say)
    user = KeyPair.generate()
    seed = tmp_path / "user.nk"
    seed.write_text(user.seed + "\n")
    with NatsServer(jetstream=False, nkeys=[user.public_key]) as server:
        code, _, err = run(capsys, "pub", "t.x", "y", "--server", server.url, "--nkey", str(seed))
        assert code == 0, err
    op = Operator()
    op.add_account("APP")
    creds = tmp_path / "app.creds"
    creds.write_text(op.user_creds("APP"))
    with NatsServer(jetstream=False, config=op.server_config()) as server:
        code, _, err = run(capsys, "pub", "t.x", "y", "--server", server.url, "--creds", str(creds))
        assert code == 0, err
        for option, name, what in (("--creds", "gone.creds", "credentials"), ("--nkey", "gone.nk", "nkey seed")):
            missing = tmp_path / "nowhere" / name
            code, out, err = run(capsys, "pub", "t.x", "y", "--server", server.url, option, str(missing))
            assert code == 1 and out == "", err
            assert err.splitlines() == [f"error: cannot read the {what} file '{missing}': No such file or directory"]


def test_a_missing_seed_file_is_named_as_a_file() -> None:
    with pytest.raises(natsjs_sync.AuthorizationError, match=r"cannot read the nkey seed file '/no/such/dir/u\.nk'"):
        natsjs_sync.connect("nats://127.0.0.1:1", nkeys_seed="/no/such/dir/u.nk")


@pytest.mark.parametrize("value", ["SUAMWJCL7I3VQ2WNUSQ6MZ3XPZ5TQYNMX7GWRFLWXWNAFM", "s3cret-t0ken", "pass word"])
def test_a_secret_given_as_creds_is_not_quoted(capsys: pytest.CaptureFixture[str], contexts: Path,
                                               value: str) -> None:
    # One line that is no path: a seed cut short or a token pasted in the wrong place, as likely as
    # a missing file's name. A connect never gets that far (nothing is sent).
    code, out, err = run(capsys, "pub", "x", "y", "--server", "nats://127.0.0.1:1", "--creds", value)
    assert code == 1 and out == "", err
    assert value not in err and err.startswith("error: user_credentials is neither a credentials file"), err


@pytest.mark.parametrize("argv", [
    ["pub", "x", "y", "--timeout", "soon"], ["pub", "x", "y", "--timeout=-1s"], ["--timeout", "0", "pub", "x", "y"],
    ["sub", "x", "--timeout", "later"], ["bench", "--msgs", "0"], ["bench", "--msgs", "-5"],
    ["bench", "--sync-msgs", "0"], ["bench", "--size", "-1"], ["bench", "--size", "1XB"], ["demo", "--count", "0"],
    ["pub", "x", "y", "--count", "0"], ["consumer", "next", "S", "C", "--count", "-1"],
    # Durations past what a wait can take (Go's longest is 2562047h47m16.854775807s) or infinite.
    ["reply", "x", "--timeout", "1e12"], ["--timeout", "1e12", "pub", "x", "y"], ["pub", "x", "--timeout", "2562048h"],
    ["kv", "add", "B", "--ttl", "inf"], ["kv", "add", "B", "--ttl", "nan"],
    ["stream", "add", "S", "--subjects", "s", "--max-age", "inf"],
    ["stream", "add", "S", "--subjects", "s", "--dupe-window", "-1"],
    ["consumer", "add", "S", "C", "--ack-wait", "1e300"], ["service", "ls", "--stall", "0"],
    ["service", "ping", "--stall", "nan"], ["server", "ls", "--expect", "0"],
    # A payload no server takes, which the command would make before asking one.
    ["bench", "--size", "99999999999MB"], ["bench", "--size", "65MiB"]])
def test_bad_option_values_give_one_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    out, err = capsys.readouterr()
    (line,) = err.splitlines()
    assert out == "" and ": error: argument " in line, line


def test_bench_sizes_take_the_nats_cli_units() -> None:
    from natsjs_sync.cli.bench import message_size

    assert [message_size(s) for s in ("0", "128", "128B", "1KB", "2k", "1MiB", "64MB")] == [
        0, 128, 128, 1024, 2048, 1 << 20, 64 << 20]


@pytest.mark.parametrize("argv", [
    ["--timeout", "soon", "server", "check", "meta"], ["server", "--timeout", "soon", "check", "meta"],
    ["server", "check", "meta", "--timeout", "0"], ["server", "check", "meta", "--timeout=-2s"],
    ["server", "check", "meta", "--user"], ["server", "check", "bogus"], ["server", "check", "stream"]])
def test_every_usage_error_of_server_check_is_unknown(argv: list[str]) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "natsjs_sync", *argv], capture_output=True, text=True, timeout=60,
                          env=env, cwd=REPO)
    assert proc.returncode == 3, (proc.stdout, proc.stderr)
    (line,) = proc.stdout.splitlines()
    assert line.startswith("UNKNOWN ") and "Traceback" not in proc.stderr


@pytest.mark.parametrize("how", ["--server", "NATS_URL"])
def test_a_server_named_keeps_the_selected_contexts_credentials(capsys: pytest.CaptureFixture[str], contexts: Path,
                                                               auth_server: NatsServer, how: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from natsjs_sync import natscontext

    # The context's URL leads nowhere; its credentials are the server's.
    natscontext.save("work", url="nats://127.0.0.1:1", user="app", password="s3cret")
    natscontext.select("work")
    argv = ["pub", "c.x", "y"]
    if how == "--server":
        argv += ["--server", auth_server.url]
    else:
        monkeypatch.setenv("NATS_URL", auth_server.url)
    with natsjs_sync.connect(auth_server.url, user="app", password="s3cret") as nc:
        sub = nc.subscribe("c.x")
        nc.flush()
        code, _, err = run(capsys, *argv)
        assert code == 0, err
        assert sub.next_msg(timeout=10).data == b"y"
        # Credentials given on the command line replace the context's.
        code, _, err = run(capsys, *argv, "--user", "app", "--password", "wrong")
        assert code == 1 and "authorization" in err.lower(), err


def test_no_context_uses_none(capsys: pytest.CaptureFixture[str], contexts: Path, nats_server: NatsServer,
                               tmp_path: Path) -> None:
    from natsjs_sync import natscontext

    missing = tmp_path / "gone.creds"
    natscontext.save("broken", url="nats://127.0.0.1:1", creds=str(missing))
    natscontext.select("broken")
    code, _, err = run(capsys, "pub", "n.x", "y", "--server", nats_server.url)
    assert code == 1 and str(missing) in err, err  # the selected context's credentials apply
    for argv in (["pub", "n.x", "y", "--server", nats_server.url, "--no-context"],
                 ["--no-context", "--context", "broken", "pub", "n.x", "y", "--server", nats_server.url]):
        code, _, err = run(capsys, *argv)
        assert code == 0, (argv, err)


def test_no_server_reachable_is_said_naming_the_url_masked(capsys: pytest.CaptureFixture[str], contexts: Path) -> None:
    for argv in (["pub", "x", "y"], ["stream", "ls"], ["sub", "x"], ["kv", "ls"]):
        code, out, err = run(capsys, *argv, "--server", "nats://app:pw-9xQ@127.0.0.1:1")
        assert code == 1 and out == "", (argv, out)
        (line,) = err.splitlines()
        assert line.startswith("error: no NATS server reachable (") and "nats://127.0.0.1:1" in line, line
        assert "pw-9xQ" not in line and "natsjs-sync server" in line
