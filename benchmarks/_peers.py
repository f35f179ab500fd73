"""The nats.go and nats.js peers: built or installed on first use, skipped with a note.

Each peer is a small program of ours (benchmarks/peers/) that runs one scenario
and prints one JSON line. Toolchains:

* nats.go: the ``go`` command and nats.go in GOPATH, as Debian packages them
  (``apt-get install golang-go golang-github-nats-io-go-nats-dev``); built
  offline in GOPATH mode (``GOPATH=/usr/share/gocode``, or ``$NATSJS_SYNC_GOPATH``).
* nats.js: ``node`` and ``npm``; the packages are installed once into
  ``~/.cache/natsjs-sync-bench/node`` (or ``$NATSJS_SYNC_BENCH_CACHE/node``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("NATSJS_SYNC_BENCH_CACHE", Path.home() / ".cache" / "natsjs-sync-bench"))

NODE_PACKAGES = {"@nats-io/transport-node": "3.4.0", "@nats-io/jetstream": "3.4.0", "@nats-io/kv": "3.4.0"}


class Peer:
    """A peer program: ``argv + [mode, url, *args]`` prints one JSON object."""

    name = ""

    def __init__(self) -> None:
        self.argv: list[str] | None = None
        self.cwd: Path | None = None
        self.note = ""

    def prepare(self) -> bool:
        """Build or install; False (with :attr:`note` saying why) when the toolchain is missing."""
        raise NotImplementedError

    def run(self, mode: str, url: str, *args: object, timeout: float = 300) -> dict[str, Any]:
        assert self.argv is not None
        done = subprocess.run([*self.argv, mode, url, *map(str, args)], cwd=self.cwd, capture_output=True,
                              text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"{self.name} {mode} failed: {done.stderr[-2000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])

    def rate(self, mode: str, url: str, *args: object) -> float:
        return float(self.run(mode, url, *args)["rate"])

    def responder(self, url: str) -> subprocess.Popen[str]:
        """A ``respond`` process, started and ready; close its stdin to stop it."""
        assert self.argv is not None
        proc = subprocess.Popen([*self.argv, "respond", url], cwd=self.cwd, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            proc.kill()
            raise RuntimeError(f"{self.name} responder did not start")
        return proc


class GoPeer(Peer):
    name = "nats.go"

    def prepare(self) -> bool:
        go = shutil.which("go")
        gopath = os.environ.get("NATSJS_SYNC_GOPATH", "/usr/share/gocode")
        if go is None:
            self.note = "nats.go skipped: no `go` on PATH (apt-get install golang-go golang-github-nats-io-go-nats-dev)"
            return False
        if not (Path(gopath) / "src/github.com/nats-io/nats.go").is_dir():
            self.note = (f"nats.go skipped: nats.go not in GOPATH {gopath} "
                         "(apt-get install golang-github-nats-io-go-nats-dev)")
            return False
        out = CACHE / "go" / "natsbench"
        out.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "GO111MODULE": "off", "GOPATH": gopath, "GOFLAGS": "",
               "GOCACHE": str(CACHE / "go" / "cache")}
        done = subprocess.run([go, "build", "-o", str(out), str(HERE / "peers" / "go" / "main.go")],
                              env=env, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            self.note = f"nats.go skipped: build failed: {done.stderr[-500:]}"
            return False
        self.argv = [str(out)]
        return True


class JsPeer(Peer):
    name = "nats.js"

    def prepare(self) -> bool:
        node, npm = shutil.which("node"), shutil.which("npm")
        if node is None or npm is None:
            self.note = "nats.js skipped: node and npm are not on PATH"
            return False
        folder = CACHE / "node"
        stamp = folder / "installed.json"
        if not stamp.exists() or json.loads(stamp.read_text()) != NODE_PACKAGES:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "package.json").write_text(json.dumps({"name": "natsjs-sync-bench", "private": True,
                                                             "type": "module"}))
            try:
                done = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--loglevel=error",
                                       *(f"{k}@{v}" for k, v in NODE_PACKAGES.items())],
                                      cwd=folder, capture_output=True, text=True, timeout=300)
            except subprocess.TimeoutExpired:
                done = None
            if done is None or done.returncode != 0:
                self.note = "nats.js skipped: npm install failed (is the npm registry reachable?)"
                return False
            stamp.write_text(json.dumps(NODE_PACKAGES))
        # ES modules resolve packages from the script's folder, so the script runs from there.
        shutil.copyfile(HERE / "peers" / "js" / "bench.mjs", folder / "bench.mjs")
        self.argv, self.cwd = [node, "bench.mjs"], folder
        return True


def available_peers() -> list[Peer]:
    """Every peer whose toolchain is present; a note on stderr for each one skipped."""
    peers: list[Peer] = []
    for peer in (GoPeer(), JsPeer()):
        if peer.prepare():
            peers.append(peer)
        else:
            print(peer.note, file=sys.stderr, flush=True)
    return peers
