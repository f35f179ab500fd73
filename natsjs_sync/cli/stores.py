"""``natsjs-sync kv ...`` and ``natsjs-sync obj ...``."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from typing import Any

from ..errors import ObjectNotFoundError, TimeoutError
from . import STOP_AFTER, _note, _print, client_for, count_or_zero, payload_text, positive_int, read_stdin, when
from .server import duration


class ProgressBar:
    """A one-line progress bar on stderr (only drawn on a terminal, or when forced)."""

    def __init__(self, label: str, force: bool = False, width: int = 30):
        self.label = label
        self.width = width
        self.enabled = force or sys.stderr.isatty()
        self.last = 0.0
        self.start = time.monotonic()

    def __call__(self, done: int, total: int | None) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.last < 0.1 and (total is None or done < total):
            return
        self.last = now
        rate = done / max(now - self.start, 1e-6) / 1e6
        if total:
            filled = int(self.width * done / total)
            bar = "#" * filled + "-" * (self.width - filled)
            text = f"\r{self.label} [{bar}] {done * 100 // total:3d}% {done:,}/{total:,} B {rate:.1f} MB/s"
        else:
            text = f"\r{self.label} {done:,} B {rate:.1f} MB/s"
        sys.stderr.write(text)
        sys.stderr.flush()

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()


# ---------------------------------------------------------------------- kv

def kv_ls(args: argparse.Namespace) -> int:
    with client_for(args) as nc:
        js = nc.jetstream()
        if args.bucket:
            keys = js.key_value(args.bucket).keys()
            for k in sorted(keys):
                _print(k)
            if not keys:
                _print(f"no keys in {args.bucket}")
            return 0
        stores = list(js.key_value_stores())
        if not stores:
            _print("no key-value buckets")
        for st in stores:
            _print(f"{st.bucket:24} {st.values:>8,} values  history {st.history}  ttl {st.ttl or '-'}  "
                   f"{st.bytes:,} bytes")
    return 0


def kv_add(args: argparse.Namespace) -> int:
    with client_for(args) as nc:
        kv = nc.jetstream().create_key_value(bucket=args.bucket, history=args.history, ttl=args.ttl,
                                             storage=args.storage)
        _print(f"created bucket {kv.bucket}")
    return 0


def kv_get(args: argparse.Namespace) -> int:
    with client_for(args) as nc:
        e = nc.jetstream().key_value(args.bucket).get(args.key, revision=args.revision)
        if args.raw:
            sys.stdout.buffer.write(e.value)
            sys.stdout.flush()
        else:
            _print(f"{args.bucket} > {e.key} revision {e.revision} ({when(e.created)}):")
            _print(payload_text(e.value))
    return 0


def kv_put(args: argparse.Namespace) -> int:
    with client_for(args) as nc:
        value = args.value.encode() if args.value is not None else read_stdin("the value")
        rev = nc.jetstream().key_value(args.bucket).put(args.key, value)
        _print(f"{args.bucket} > {args.key} revision {rev}")
    return 0


def kv_del(args: argparse.Namespace) -> int:
    with client_for(args) as nc:
        kv = nc.jetstream().key_value(args.bucket)
        rev = kv.purge(args.key) if args.purge else kv.delete(args.key)
        _print(f"{'purged' if args.purge else 'deleted'} {args.bucket} > {args.key} (revision {rev})")
    return 0


def kv_history(args: argparse.Namespace) -> int:
    with client_for(args) as nc:
        for e in nc.jetstream().key_value(args.bucket).history(args.key):
            _print(f"{e.revision:>8} {e.operation.value:5} {when(e.created)} {payload_text(e.value)}")
    return 0


def kv_watch(args: argparse.Namespace) -> int:
    with client_for(args, long_running=True) as nc:
        kv = nc.jetstream().key_value(args.bucket)
        seen = 0
        deadline = time.monotonic() + args.stop_after if args.stop_after else None
        with kv.watch(*(args.keys or [">"]), include_history=args.history, updates_only=args.updates_only) as w:
            while not args.count or seen < args.count:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                try:
                    e = w.next(timeout=remaining)
                except TimeoutError:
                    break
                if e is None:
                    _print("-- up to date --")
                    continue
                seen += 1
                _print(f"[{e.revision}] {e.operation.value} {e.key}: {payload_text(e.value)}")
    return 0


# ---------------------------------------------------------------------- obj

def obj_ls(args: argparse.Namespace) -> int:
    with client_for(args) as nc:
        js = nc.jetstream()
        if args.bucket:
            try:
                infos = js.object_store(args.bucket).list()
            except ObjectNotFoundError:
                infos = []
                _print(f"no objects in {args.bucket}")
            for i in infos:
                _print(f"{i.name:40} {i.size:>14,} B  {i.chunks:>6} chunks  {when(i.mtime)}")
            return 0
        stores = list(js.object_stores())
        if not stores:
            _print("no object stores")
        for st in stores:
            _print(f"{st.bucket:24} {st.size:>14,} bytes  {'sealed' if st.sealed else ''}")
    return 0


def obj_add(args: argparse.Namespace) -> int:
    with client_for(args) as nc:
        obs = nc.jetstream().create_object_store(bucket=args.bucket, storage=args.storage)
        _print(f"created object store {obs.bucket}")
    return 0


def obj_put(args: argparse.Namespace) -> int:
    with client_for(args) as nc:
        obs = nc.jetstream().object_store(args.bucket)
        name = args.name or os.path.basename(args.file)
        with ProgressBar(f"put {name}", force=args.progress) as bar:
            info = obs.put_file(args.file, name=name, progress=bar)
        _print(f"stored {args.bucket} > {info.name}: {info.size:,} bytes in {info.chunks} chunk(s), {info.digest}")
    return 0


def obj_get(args: argparse.Namespace) -> int:
    with client_for(args) as nc:
        obs = nc.jetstream().object_store(args.bucket)
        if args.output == "-":
            with obs.get(args.name) as result:
                for chunk in result.chunks():
                    sys.stdout.buffer.write(chunk)
            sys.stdout.flush()
            _note(f"wrote {result.info.size:,} bytes to stdout (digest verified)")
            return 0
        out = args.output or os.path.basename(args.name)
        if os.path.exists(out) and not args.force:
            raise SystemExit(f"error: {out} exists: pass --force to overwrite it, or -o to choose another file")
        # Written beside it and renamed once whole and verified: a get that fails or is stopped
        # (Ctrl-C, SIGTERM) leaves no truncated file under the name, nor harms the one --force
        # replaces. What is not a plain file (a device, a pipe, a link) is written through.
        through = os.path.islink(out) or (os.path.exists(out) and not os.path.isfile(out))
        part = out if through else os.path.join(os.path.dirname(out), f".{os.path.basename(out)}.{os.getpid()}.part")
        try:
            with ProgressBar(f"get {args.name}", force=args.progress) as bar:
                info = obs.get_file(args.name, part, progress=bar)
            if part != out:
                os.replace(part, out)
        except BaseException:
            if part != out:
                with contextlib.suppress(OSError):
                    os.unlink(part)
            raise
        _print(f"wrote {out}: {info.size:,} bytes (digest verified)")
    return 0


def obj_rm(args: argparse.Namespace) -> int:
    with client_for(args) as nc:
        nc.jetstream().object_store(args.bucket).delete(args.name)
        _print(f"deleted {args.bucket} > {args.name}")
    return 0


def obj_info(args: argparse.Namespace) -> int:
    with client_for(args) as nc:
        i = nc.jetstream().object_store(args.bucket).get_info(args.name)
        _print(f"{i.bucket} > {i.name}")
        _print(f"  size {i.size:,} bytes in {i.chunks} chunk(s), modified {when(i.mtime)}")
        _print(f"  digest {i.digest}")
        if i.description:
            _print(f"  description {i.description}")
        if i.is_link and i.options and i.options.link:
            _print(f"  link to {i.options.link.bucket} > {i.options.link.name or '(bucket)'}")
    return 0


def register(sub: Any) -> None:
    kv = sub.add_parser("kv", help="key-value buckets").add_subparsers(dest="action", required=True)
    bucket_help, key_help = "the bucket's name", "the key"
    p = kv.add_parser("ls", help="list buckets, or a bucket's keys")
    p.add_argument("bucket", nargs="?", help="list this bucket's keys (default: list the buckets)")
    p.set_defaults(func=kv_ls)
    p = kv.add_parser("add", help="create a bucket")
    p.add_argument("bucket", help=bucket_help)
    p.add_argument("--history", type=positive_int, default=1, help="values kept per key (default 1)")
    p.add_argument("--ttl", type=duration, default=0.0, metavar="DURATION",
                   help="how long a value lives: seconds, or e.g. 90s, 24h (0: for ever)")
    p.add_argument("--storage", choices=["file", "memory"], default="file",
                   help="where values are kept (default: file)")
    p.set_defaults(func=kv_add)
    p = kv.add_parser("get", help="print a key's value")
    p.add_argument("bucket", help=bucket_help)
    p.add_argument("key", help=key_help)
    p.add_argument("--revision", type=int, help="this revision of the value (default: the latest)")
    p.add_argument("--raw", action="store_true", help="only the value bytes")
    p.set_defaults(func=kv_get)
    p = kv.add_parser("put", help="set a key (value from the argument or stdin)")
    p.add_argument("bucket", help=bucket_help)
    p.add_argument("key", help=key_help)
    p.add_argument("value", nargs="?", help="the value (default: read from stdin)")
    p.set_defaults(func=kv_put)
    p = kv.add_parser("del", help="delete a key")
    p.add_argument("bucket", help=bucket_help)
    p.add_argument("key", help=key_help)
    p.add_argument("--purge", action="store_true", help="remove its history too")
    p.set_defaults(func=kv_del)
    p = kv.add_parser("history", help="a key's revisions")
    p.add_argument("bucket", help=bucket_help)
    p.add_argument("key", help=key_help)
    p.set_defaults(func=kv_history)
    p = kv.add_parser("watch", help="print changes as they happen")
    p.add_argument("bucket", help=bucket_help)
    p.add_argument("keys", nargs="*", help="the keys to watch, wildcards allowed (default: all)")
    p.add_argument("--history", action="store_true", help="every kept value first, not only the latest")
    p.add_argument("--updates-only", action="store_true", help="only changes made from now on")
    p.add_argument("--count", type=count_or_zero, default=0, help="stop after this many changes (0: never)")
    p.add_argument("--timeout", **STOP_AFTER)
    p.set_defaults(func=kv_watch)

    obj = sub.add_parser("obj", help="object stores").add_subparsers(dest="action", required=True)
    store_help, name_help = "the object store's name", "the object's name"
    p = obj.add_parser("ls", help="list object stores, or a store's objects")
    p.add_argument("bucket", nargs="?", help="list this store's objects (default: list the stores)")
    p.set_defaults(func=obj_ls)
    p = obj.add_parser("add", help="create an object store")
    p.add_argument("bucket", help=store_help)
    p.add_argument("--storage", choices=["file", "memory"], default="file",
                   help="where objects are kept (default: file)")
    p.set_defaults(func=obj_add)
    p = obj.add_parser("put", help="store a file")
    p.add_argument("bucket", help=store_help)
    p.add_argument("file", help="the file to store")
    p.add_argument("--name", help="the object's name (default: the file's base name)")
    p.add_argument("--progress", action="store_true", help="draw the progress bar even without a terminal")
    p.set_defaults(func=obj_put)
    p = obj.add_parser("get", help="write an object to a file")
    p.add_argument("bucket", help=store_help)
    p.add_argument("name", help=name_help)
    p.add_argument("--output", "-o", help="the file to write (default: the object's base name; '-': stdout)")
    p.add_argument("--force", "-f", action="store_true", help="overwrite an existing file")
    p.add_argument("--progress", action="store_true", help="draw the progress bar even without a terminal")
    p.set_defaults(func=obj_get)
    p = obj.add_parser("rm", help="delete an object")
    p.add_argument("bucket", help=store_help)
    p.add_argument("name", help=name_help)
    p.set_defaults(func=obj_rm)
    p = obj.add_parser("info", help="an object's metadata")
    p.add_argument("bucket", help=store_help)
    p.add_argument("name", help=name_help)
    p.set_defaults(func=obj_info)
