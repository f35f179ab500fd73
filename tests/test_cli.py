"""The natsjs-sync command line, run as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from natsjs_sync.cli import main
from natsjs_sync.testing import NatsServer

REPO = Path(__file__).resolve().parents[1]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_demo_with_an_embedded_server() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("NATS_URL", None)
    proc = subprocess.run([sys.executable, "-m", "natsjs_sync", "demo"], capture_output=True, text=True,
                          timeout=60, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "started an embedded nats-server" in out
    assert "received demo.greeting.2: hello #2" in out
    assert "reply 'pong: ping'" in out
    assert "Traceback" not in proc.stderr


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
