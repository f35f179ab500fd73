"""The public names: what ../shared/API.md promises exists, every exported name
is documented in docs/, and mypy --strict passes on the package."""

from __future__ import annotations

import importlib
import inspect
import pathlib
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import natsjs_sync

ROOT = Path(__file__).resolve().parents[1]
PUBLIC_MODULES = ["natsjs_sync", "natsjs_sync.jetstream", "natsjs_sync.micro", "natsjs_sync.spark",
                  "natsjs_sync.testing", "natsjs_sync.kvcodec", "natsjs_sync.codecs"]

# The contract of API.md, name by name.
CONTRACT: dict[str, list[str]] = {
    "natsjs_sync": [
        "connect", "Client", "Msg", "Subscription", "Headers", "NatsError", "ConnectionClosedError",
        "NoServersError", "AuthorizationError", "SecureConnRequiredError", "StaleConnectionError", "TimeoutError",
        "NoRespondersError", "BadSubjectError", "MaxPayloadError", "SlowConsumerError", "JetStreamError",
        "StreamNotFoundError", "ConsumerNotFoundError", "StreamNameInUseError", "MsgNotFoundError",
        "NoMessagesError", "KeyNotFoundError", "KeyDeletedError", "KeyExistsError", "WrongLastSequenceError",
        "BucketNotFoundError", "ObjectNotFoundError", "DigestMismatchError", "JetStreamNotEnabledError",
        "PayloadDecodeError", "PayloadEncodeError",
    ],
    "natsjs_sync.jetstream": [
        "JetStream", "Stream", "Consumer", "StreamConfig", "ConsumerConfig", "PubAck", "MessageBatch",
        "MessagesContext", "ConsumeContext", "OrderedConsumer", "KeyValue", "KeyValueConfig", "Entry",
        "KeyWatcher", "ObjectStore", "ObjectStoreConfig", "ObjectMeta", "ObjectInfo", "ObjectResult",
    ],
    "natsjs_sync.micro": [
        "add_service", "Service", "ServiceConfig", "EndpointConfig", "GroupConfig", "Request", "ServiceError",
        "ServiceInfo", "ServiceStats", "ServicePing", "EndpointInfo", "EndpointStats", "ServiceVerb",
        "control_subject", "ServiceClient", "ServiceDefinition",
    ],
    "natsjs_sync.spark": ["NatsConfig", "publish_partition", "JetStreamDataSource"],
    "natsjs_sync.testing": ["NatsServer", "NatsCluster"],
    "natsjs_sync.kvcodec": ["KeyCodec", "ValueCodec", "FilterableKeyCodec", "Base64KeyCodec", "PathKeyCodec",
                            "ChainKeyCodec", "Base64ValueCodec", "ZlibValueCodec", "ChainValueCodec"],
    "natsjs_sync.codecs": [
        "Codec", "JsonCodec", "MsgPackCodec", "JSON", "MSGPACK", "CONTENT_TYPE", "register_codec", "codec_for",
        "decode_msg", "TypedMsg", "TypedSubject", "TypedReader", "TypedKeyValue", "TypedEntry", "TypedWatcher",
        "TypedObjectStore", "DecodeErrorHandler",
    ],
}

METHODS: dict[str, list[str]] = {
    "natsjs_sync.Client": ["publish", "subscribe", "request", "flush", "rtt", "drain", "close", "jetstream",
                           "is_connected", "connected_url", "server_info", "max_payload", "stats",
                           "__enter__", "__exit__", "typed"],
    "natsjs_sync.Subscription": ["next_msg", "unsubscribe", "drain", "__iter__", "typed"],
    "natsjs_sync.Msg": ["respond", "ack", "ack_sync", "nak", "in_progress", "term", "metadata", "decode"],
    "natsjs_sync.jetstream.JetStream": [
        "account_info", "create_stream", "update_stream", "create_or_update_stream", "delete_stream", "stream",
        "stream_name_by_subject", "list_streams", "stream_names", "publish", "publish_async",
        "publish_async_complete", "publish_async_pending", "typed", "create_consumer", "create_or_update_consumer",
        "update_consumer", "consumer", "delete_consumer", "ordered_consumer", "create_key_value", "key_value",
        "delete_key_value", "key_value_store_names", "create_object_store", "object_store", "delete_object_store",
        # nats-py names
        "add_stream", "stream_info", "purge_stream", "delete_msg", "get_msg", "find_stream_name_by_subject",
        "add_consumer", "consumer_info", "subscribe", "pull_subscribe",
    ],
    "natsjs_sync.jetstream.Stream": [
        "info", "cached_info", "purge", "get_msg", "get_last_msg_for_subject", "delete_msg", "create_consumer",
        "create_or_update_consumer", "update_consumer", "consumer", "delete_consumer", "list_consumers",
        "consumer_names",
    ],
    "natsjs_sync.jetstream.Consumer": ["info", "cached_info", "fetch", "fetch_bytes", "fetch_no_wait", "next",
                                       "messages", "consume", "typed"],
    "natsjs_sync.jetstream.OrderedConsumer": ["fetch", "next", "messages", "consume", "typed"],
    "natsjs_sync.jetstream.PushConsumer": ["consume", "typed"],
    "natsjs_sync.jetstream.KeyValue": ["put", "create", "update", "get", "delete", "purge", "purge_deletes",
                                       "keys", "history", "watch", "watch_all", "status", "with_codecs",
                                       "typed"],
    "natsjs_sync.jetstream.ObjectStore": [
        "put", "put_bytes", "put_string", "put_file", "get", "get_bytes", "get_string", "get_file", "get_info",
        "update_meta", "delete", "add_link", "add_bucket_link", "list", "watch", "seal", "status", "typed",
    ],
    "natsjs_sync.spark.NatsConfig": ["client"],
}


def _resolve(dotted: str) -> Any:
    module, _, attr = dotted.rpartition(".")
    return getattr(importlib.import_module(module), attr)


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_contract_names_are_exported(module: str) -> None:
    mod = importlib.import_module(module)
    missing = [name for name in CONTRACT[module] if name not in mod.__all__ or not hasattr(mod, name)]
    assert not missing, f"{module} lacks {missing}"


@pytest.mark.parametrize("cls", sorted(METHODS))
def test_contract_methods_exist(cls: str) -> None:
    obj = _resolve(cls)
    try:
        init = inspect.getsource(obj.__init__) if "__init__" in vars(obj) else ""
    except (OSError, TypeError):
        init = ""
    # Attributes set per instance (``nc.stats``) count as well as class members.
    assert not [m for m in METHODS[cls] if not hasattr(obj, m) and f"self.{m} =" not in init]


def test_timeout_error_is_also_the_builtin() -> None:
    assert issubclass(natsjs_sync.TimeoutError, TimeoutError)
    assert issubclass(natsjs_sync.TimeoutError, natsjs_sync.NatsError)


def _documented() -> set[int]:
    """ids of every object an ``auto*`` directive in docs/ documents."""
    found: set[int] = set()
    for rst in (ROOT / "docs").glob("*.rst"):
        text = rst.read_text()
        for kind, target in re.findall(r"^\.\. auto(\w+):: ([\w.]+)", text, flags=re.M):
            if kind == "module":
                mod = importlib.import_module(target)
                names = getattr(mod, "__all__", [n for n in vars(mod) if not n.startswith("_")])
                found.update(id(getattr(mod, n)) for n in names)
            else:
                found.add(id(_resolve(target)))
    return found


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_every_exported_name_is_documented(module: str) -> None:
    documented = _documented()
    mod = importlib.import_module(module)
    undocumented = [n for n in mod.__all__
                    if n not in ("__version__", "USE_DEFAULT") and id(getattr(mod, n)) not in documented]
    assert not undocumented, f"{module}.__all__ names missing from docs/: {undocumented}"


def test_mypy_strict_passes() -> None:
    proc = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr


USER_CODE_WITH_TYPOS = '''
import natsjs_sync as nats

nc = nats.connect()
js = nc.jetstream()
js.create_stream(name="S", subjects=["s.>"], max_age=60.0)
js.create_stream(name="S", subjectz=["s.>"])
js.create_consumer("S", durable_nmae="d")
js.create_key_value(bucket="b", history="5")
'''


def test_mypy_checks_the_keywords_of_config_taking_calls(tmp_path: pathlib.Path) -> None:
    """A user's type checker sees a misspelt or mistyped config keyword."""
    script = tmp_path / "user_code.py"
    script.write_text(USER_CODE_WITH_TYPOS)
    proc = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(script)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    out = proc.stdout
    assert proc.returncode == 1, out
    assert '"subjectz"' in out and '"durable_nmae"' in out and '"history"' in out
    assert out.count("error:") == 3, out  # those three, and nothing in the package itself


def test_config_keyword_types_match_the_structs() -> None:
    from natsjs_sync.jetstream import ConsumerConfig, KeyValueConfig, ObjectStoreConfig, StreamConfig, _fields

    for struct, fields in ((StreamConfig, _fields.StreamConfigFields), (ConsumerConfig, _fields.ConsumerConfigFields),
                           (KeyValueConfig, _fields.KeyValueConfigFields),
                           (ObjectStoreConfig, _fields.ObjectStoreConfigFields)):
        assert set(fields.__annotations__) == set(struct.__struct_fields__) - {"unknown_fields"}, struct.__name__
