"""``server check message|kv|credential|consumer`` and ``--format nagios|json|prometheus|text`` as the
nats CLI's ``server check``: its flags, status words, perfdata, JSON fields, metric names and exit
codes, against a real nats-server. Every output is parsed, as a monitoring system would read it."""

from __future__ import annotations

import json
import os
import re
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync.auth import parse_creds
from natsjs_sync.cli import main
from natsjs_sync.monitor import CheckResult, Status, check_credential
from natsjs_sync.testing import NatsServer
from natsjs_sync.testing.jwt import Operator, format_creds

# ---------------------------------------------------------------------------------------------- parsers

_PERF = re.compile(r"^(?P<label>'[^']+'|[^=\s]+)=(?P<value>-?[0-9.]+)(?P<unit>[a-zA-Z%]*)"
                   r"(?:;(?P<warn>[0-9.]*)(?:;(?P<crit>[0-9.]*))?)?$")


def parse_nagios(out: str) -> dict[str, Any]:
    """A Nagios plugin's line: the status, the name, the findings by level, the perfdata by label."""
    (line,) = out.splitlines()
    text, _, perf = line.partition(" | ")
    status, _, rest = text.partition(" ")
    findings: dict[str, list[str]] = {"Crit": [], "Warn": [], "OK": [], "Unknown": []}
    # Each finding starts with its level's prefix; what comes before the first is the name.
    pieces = re.split(r" (?=(?:Crit|Warn|OK|Unknown):)", rest)
    for piece in pieces[1:]:
        level, _, finding = piece.partition(":")
        findings[level].append(finding)
    perfdata = {}
    for item in perf.split():
        m = _PERF.match(item)
        assert m, f"not Nagios perfdata: {item!r} in {line!r}"
        perfdata[m["label"]] = (float(m["value"]), m["unit"], m["warn"], m["crit"])
    return {"status": status, "name": pieces[0], "findings": findings, "perf": perfdata}


_SAMPLE = re.compile(r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)\{(?P<labels>[^}]*)\} (?P<value>\S+)$')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_prometheus(out: str) -> dict[str, tuple[str, dict[str, str], float]]:
    """The Prometheus text exposition format: each metric's type, labels and value (one sample each)."""
    types: dict[str, str] = {}
    samples: dict[str, tuple[str, dict[str, str], float]] = {}
    assert out.endswith("\n")
    for line in out.splitlines():
        if line.startswith("# HELP "):
            assert len(line.split(" ", 3)) == 4, line
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            types[name] = kind
        elif line:
            m = _SAMPLE.match(line)
            assert m and m["name"] in types, f"not a sample of a declared metric: {line!r}"
            samples[m["name"]] = (types[m["name"]], dict(_LABEL.findall(m["labels"])), float(m["value"]))
    names = [line.split(" ")[2] for line in out.splitlines() if line.startswith("# TYPE ")]
    assert names == sorted(names), "metric families sorted by name, as Prometheus's registry gathers them"
    return samples


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out, _ = capsys.readouterr()
    return code, out


@pytest.fixture(scope="module")
def server() -> Iterator[NatsServer]:
    with NatsServer(jetstream=True) as srv:
        yield srv


@pytest.fixture
def js(server: NatsServer) -> Iterator[Any]:
    with nats.connect(server.url) as nc:
        yield nc.jetstream(timeout=10.0)


# ---------------------------------------------------------------------------------------------- rendering


def test_the_three_formats_of_one_result_as_the_nats_cli_renders_them() -> None:
    # No server: a result built by hand, rendered byte for byte as jsm.go's monitor.Result renders it.
    r = CheckResult("kv", "CONFIG")
    r.ok("bucket CONFIG")
    r.critical("key a > b not found")
    r.warning("12 values")
    r.perf("values", 12, "", 10, 20, description="How many values are stored in the bucket")
    r.perf("age", 1.23456, "s", None, 3600)
    r.perf("bytes", 1_500_000, "B")
    assert r.render("nagios") == ("CRITICAL CONFIG Crit:key a > b not found Warn:12 values OK:bucket CONFIG"
                                  " | values=12;10;20 age=1.2346s;;3600.0000 bytes=1500000B")
    assert r.line() == r.render("nagios") and r.exit_code("nagios") == 2
    assert r.render("json") == """{
  "status": "CRITICAL",
  "check_suite": "kv",
  "check_name": "CONFIG",
  "warning": [
    "12 values"
  ],
  "critical": [
    "key a \\u003e b not found"
  ],
  "ok": [
    "bucket CONFIG"
  ],
  "perf_data": [
    {
      "name": "values",
      "value": 12,
      "warning": 10,
      "critical": 20
    },
    {
      "name": "age",
      "value": 1.23456,
      "warning": 0,
      "critical": 3600,
      "unit": "s"
    },
    {
      "name": "bytes",
      "value": 1500000,
      "warning": 0,
      "critical": 0,
      "unit": "B"
    }
  ]
}"""
    assert r.render("prometheus", namespace="ns") == """\
# HELP ns_kv_age Data about the NATS CLI check kv
# TYPE ns_kv_age gauge
ns_kv_age{item="CONFIG"} 1.23456
# HELP ns_kv_bytes Data about the NATS CLI check kv
# TYPE ns_kv_bytes gauge
ns_kv_bytes{item="CONFIG"} 1.5e+06
# HELP ns_kv_status_code Nagios compatible status code for kv
# TYPE ns_kv_status_code gauge
ns_kv_status_code{item="CONFIG",status="CRITICAL"} 2
# HELP ns_kv_values How many values are stored in the bucket
# TYPE ns_kv_values gauge
ns_kv_values{item="CONFIG"} 12
"""
    assert r.exit_code("prometheus") == 0 and r.exit_code("json") == 2
    text = r.render("text")
    assert text.startswith("CONFIG: CRITICAL\n") and "│ Critical │ key a > b not found" in text
    with pytest.raises(ValueError, match="unknown format"):
        r.render("yaml")
    # A name with a quote becomes a label value with a dot, as the nats CLI's.
    q = CheckResult("stream", 'a"b\\c')
    assert 'item="a.b\\\\c",status="OK"} 0' in q.render("prometheus")
    assert q.render("nagios") == 'OK a"b\\c'


# ---------------------------------------------------------------------------------------------- message


def test_message_check(capsys: pytest.CaptureFixture[str], server: NatsServer, js: Any) -> None:
    js.create_stream(name="BEAT", subjects=["beat.>"], storage="memory")
    try:
        js.publish("beat.web", b"status: ok")
        js.publish("beat.stamp", str(int(time.time()) - 7200).encode())
        s = ("--server", server.url)
        code, out = run(capsys, "server", "check", "message", "--stream", "BEAT", "--subject", "beat.web",
                        "--age-warn", "1h", "--age-critical", "2h", "--content", "^status: (ok|fine)$", *s)
        line = parse_nagios(out)
        assert code == 0 and line["status"] == "OK" and line["name"] == "Stream Message", out
        assert line["findings"]["OK"] == ["Valid message on BEAT > beat.web"]
        age, unit, warn, crit = line["perf"]["age"]
        assert unit == "s" and 0 <= age < 3600 and (warn, crit) == ("3600.0000", "7200.0000")
        assert line["perf"]["size"] == (10.0, "B", None, None)

        # The body does not match: CRITICAL.
        code, out = run(capsys, "server", "check", "message", "--stream", "BEAT", "--subject", "beat.web",
                        "--content", "fail", *s)
        assert code == 2 and parse_nagios(out)["findings"]["Crit"] == ["does not match regex: fail"], out
        # The body is a Unix time two hours ago: WARNING past 1h, CRITICAL past 90m.
        stamp = ("server", "check", "message", "--stream", "BEAT", "--subject", "beat.stamp", "--body-timestamp")
        code, out = run(capsys, *stamp, "--age-warn", "1h", *s)
        line = parse_nagios(out)
        assert code == 1 and line["status"] == "WARNING" and line["findings"]["Warn"][0].endswith(" old"), out
        assert line["findings"]["Warn"][0].startswith("2h0m")
        code, out = run(capsys, *stamp, "--age-warn", "1h", "--age-critical", "90m", *s)
        assert code == 2 and parse_nagios(out)["findings"]["Crit"][0].startswith("2h0m"), out
        # Not a time: CRITICAL.
        code, out = run(capsys, "server", "check", "message", "--stream", "BEAT", "--subject", "beat.web",
                        "--body-timestamp", *s)
        assert code == 2 and parse_nagios(out)["findings"]["Crit"][0].startswith("invalid timestamp body"), out
        # No message on the subject, no such stream, a wildcard (the default '>'): CRITICAL.
        code, out = run(capsys, "server", "check", "message", "--stream", "BEAT", "--subject", "beat.none", *s)
        assert code == 2 and parse_nagios(out)["findings"]["Crit"] == ["no message found"], out
        code, out = run(capsys, "server", "check", "message", "--stream", "NOPE", "--subject", "beat.web", *s)
        assert code == 2 and parse_nagios(out)["findings"]["Crit"][0].startswith("msg load failed: "), out
        code, out = run(capsys, "server", "check", "message", "--stream", "BEAT", *s)
        assert code == 2 and parse_nagios(out)["findings"]["Crit"] == ['Check failed: invalid subject ">"'], out
    finally:
        js.delete_stream("BEAT")


def test_message_body_timestamp_out_of_a_calendar(capsys: pytest.CaptureFixture[str], server: NatsServer,
                                                 js: Any) -> None:
    # A body that is a whole number out of int64 is not a timestamp (Go's ParseInt refuses it):
    # CRITICAL. One in range but past the year 9999 or before the year 1 has an age, saturated
    # at Go's longest Duration as time.Since's: never UNKNOWN, never "the check itself failed".
    js.create_stream(name="STAMPS", subjects=["stamps.>"], storage="memory")
    try:
        for subject, body in (("huge", b"99999999999999999999"), ("future", b"9999999999999"),
                              ("ancient", b"-62135596801")):
            js.publish(f"stamps.{subject}", body)
        s = ("--server", server.url)

        def check(subject: str) -> tuple[int, dict[str, Any]]:
            code, out = run(capsys, "server", "check", "message", "--stream", "STAMPS", "--subject",
                            f"stamps.{subject}", "--body-timestamp", "--age-critical", "1h", *s)
            return code, parse_nagios(out)

        code, line = check("huge")
        assert code == 2 and line["findings"]["Crit"] == [
            "invalid timestamp body: '99999999999999999999' is out of range"], line
        code, line = check("future")  # from the future: a negative age, under any threshold
        assert code == 0 and line["perf"]["age"][0] == -9223372036.855, line
        code, line = check("ancient")
        assert code == 2 and line["perf"]["age"][0] == 9223372036.855 and line["findings"]["Crit"][0].endswith(" old")
    finally:
        js.delete_stream("STAMPS")


def test_content_regex_is_read_as_go_reads_it(capsys: pytest.CaptureFixture[str], server: NatsServer,
                                              js: Any) -> None:
    # The nats CLI compiles --content and --match-payload with Go's regexp (RE2): a pattern
    # written for it means the same here. Each case: (pattern, does the body "status: ok\n" match).
    cases = (
        ("^status: ok$", False),  # $ is the end of the text, not before a final newline
        ("(?m)^status: ok$", True),  # unless multi-line
        ("[[:alpha:]]+: [[:lower:]]{2}", True),  # POSIX classes
        ("^[[:digit:]]", False),
        (r"ok\n\z", True),  # \z, the end of the text
        (r"\Qstatus: ok\E", True), (r"\Q.*\E", False),  # a literal
        ("(?<word>ok)", True),  # a named group in Go's newer spelling
        (r"ok\s\z", True),
    )
    js.create_stream(name="RE2", subjects=["re2.>"], storage="memory")
    try:
        js.publish("re2.body", b"status: ok\n")
        for pattern, matches in cases:
            code, out = run(capsys, "server", "check", "message", "--stream", "RE2", "--subject", "re2.body",
                            "--content", pattern, "--server", server.url)
            line = parse_nagios(out)
            if matches:
                assert code == 0 and line["findings"]["OK"] == ["Valid message on RE2 > re2.body"], (pattern, out)
            else:
                assert code == 2 and line["findings"]["Crit"] == [f"does not match regex: {pattern}"], (pattern, out)
        with nats.connect(server.url) as nc:
            sub = nc.subscribe("re2echo.svc", cb=lambda msg: msg.respond(b"status: ok\n"))
            nc.flush()
            for pattern, matches in cases:
                code, out = run(capsys, "server", "check", "request", "--subject", "re2echo.svc", "--match-payload",
                                pattern, "--server", server.url)
                assert code == (0 if matches else 2), (pattern, out)
            sub.unsubscribe()
    finally:
        js.delete_stream("RE2")


# ---------------------------------------------------------------------------------------------- kv


def test_kv_check(capsys: pytest.CaptureFixture[str], server: NatsServer, js: Any) -> None:
    kv = js.create_key_value(bucket="CFG", storage="memory", history=5)
    try:
        kv.put("live", b"1")
        kv.put("gone", b"1")
        kv.delete("gone")
        kv.put("wiped", b"1")
        kv.purge("wiped")
        s = ("--server", server.url)

        def check(*argv: str) -> tuple[int, dict[str, Any]]:
            code, out = run(capsys, "server", "check", "kv", "--bucket", "CFG", *argv, *s)
            return code, parse_nagios(out)

        code, line = check("--key", "live")
        assert code == 0 and line["name"] == "CFG" and line["findings"]["OK"] == ["bucket CFG", "key live found"]
        assert line["perf"]["values"] == (4.0, "", None, None)  # two puts, a delete marker, a purge marker
        assert line["perf"]["replicas"] == (1.0, "", None, None) and line["perf"]["bytes"][1] == "B"
        for key, finding in (("gone", "key gone is deleted"), ("wiped", "key wiped is purged"),
                             ("never", "key never not found")):
            code, line = check("--key", key)
            assert code == 2 and line["findings"]["Crit"] == [finding], line
        # At or above the thresholds; below the warning one: OK.
        assert check("--values-warn", "3", "--values-critical", "10")[0] == 1
        code, line = check("--values-warn", "3", "--values-critical", "4")
        assert code == 2 and line["findings"]["Crit"] == ["4 values"] and line["perf"]["values"][2:] == ("3", "4")
        assert check("--values-warn", "10", "--values-critical", "20")[0] == 0
        # Critical below warning inverts the check (too few values), as does a warning threshold alone.
        assert check("--values-warn", "10", "--values-critical", "3")[0] == 1
        assert check("--values-warn", "10", "--values-critical", "4")[0] == 2
        assert check("--values-warn", "5")[0] == 1
        code, out = run(capsys, "server", "check", "kv", "--bucket", "NOPE", *s)
        assert code == 2 and parse_nagios(out)["findings"]["Crit"] == ["bucket NOPE not found"], out
    finally:
        js.delete_key_value("CFG")


# ---------------------------------------------------------------------------------------------- credential


def test_credential_check_offline(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NATS_URL", raising=False)
    operator = Operator()
    operator.add_account("APP")

    def creds(name: str, expires_in: float | None) -> str:
        path = tmp_path / f"{name}.creds"
        path.write_text(operator.user_creds("APP", expires_in=expires_in))
        return str(path)

    day = 86400.0
    week, never, expired = creds("week", 7 * day), creds("never", None), creds("expired", -60)

    def check(*argv: str) -> tuple[int, dict[str, Any]]:
        code, out = run(capsys, "server", "check", "credential", *argv)
        return code, parse_nagios(out)

    code, line = check("--credential", week, "--validity-warn", "2d", "--validity-critical", "24h")
    assert code == 0 and line["name"] == "Credential", line
    assert re.fullmatch(r"expires in \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \+0000 UTC", line["findings"]["OK"][0])
    expiry, unit, warn, crit = line["perf"]["expiry"]
    assert unit == "s" and 6 * day < expiry <= 7 * day and (warn, crit) == ("172800.0000", "86400.0000")
    code, line = check("--credential", week, "--validity-warn", "8d")
    assert code == 1 and line["findings"]["Warn"] == ["expires sooner than 8d0h0m0s"], line
    code, line = check("--credential", week, "--validity-warn", "30d", "--validity-critical", "1w1d")
    assert code == 2 and line["findings"]["Crit"] == ["expires sooner than 8d0h0m0s"], line
    code, line = check("--credential", never)
    assert code == 2 and line["findings"]["Crit"] == ["never expires"]
    code, line = check("--credential", never, "--no-require-expiry", "--validity-critical", "1d")
    assert code == 0 and line["findings"]["OK"] == ["never expires"]
    code, line = check("--credential", expired)
    assert code == 2 and line["findings"]["Crit"][0].startswith("expired at "), line
    code, line = check("--credential", expired, "--validity-warn", "1d")  # expired: more than a warning
    assert code == 2 and line["findings"]["Crit"][0].startswith("expired at "), line
    # The JWT alone, as a file of its own, is read as well.
    jwt = Path(week).read_text().split("\n")[1]
    (tmp_path / "user.jwt").write_text(jwt + "\n")
    assert check("--credential", str(tmp_path / "user.jwt"))[0] == 0
    # A JWT whose claims were changed after signing (a later expiry), a file that is not one, none.
    head, claims, sig = jwt.split(".")
    forged = json.loads(_b64d(claims))
    forged["exp"] += 365 * 86400
    (tmp_path / "forged.creds").write_text(format_creds(f"{head}.{_b64e(json.dumps(forged))}.{sig}", "SUAX"))
    code, line = check("--credential", str(tmp_path / "forged.creds"))
    assert code == 2 and line["findings"]["Crit"] == ["invalid credential: the JWT's signature is not its issuer's"]
    (tmp_path / "notes.txt").write_text("hello")
    for path, start in ((tmp_path / "notes.txt", "invalid credential: "), (tmp_path / "none", "credential not "
                        "accessible: "), (tmp_path, "credential not accessible: ")):
        code, line = check("--credential", str(path))
        assert code == 2 and line["findings"]["Crit"][0].startswith(start), (path, line)
    # Nothing of the credential is shown, in any format.
    jwt_again, seed = parse_creds(Path(week).read_text())
    assert jwt_again == jwt and seed.startswith("SU")
    for fmt in ("nagios", "json", "prometheus", "text"):
        out = run(capsys, "server", "check", "credential", "--credential", week, "--format", fmt)[1]
        assert jwt not in out and seed not in out and claims not in out
    # The function, for a health endpoint of one's own.
    assert check_credential(week, validity_warn=8 * day).status is Status.WARNING


def test_credential_with_an_expiry_go_cannot_decode_is_invalid(capsys: pytest.CaptureFixture[str],
                                                               tmp_path: Path) -> None:
    # Signed by its issuer, but its expiry is not an int64 (NaN and Infinity are not even JSON,
    # though Python's decoder takes them): CRITICAL "invalid credential", as the nats CLI's JWT
    # library refuses it; never UNKNOWN "the check itself failed", never OK.
    account = Operator().add_account("APP")
    head = _b64e(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}))
    for exp in ("NaN", "Infinity", "-Infinity", "1.8e9", "1800000000.5", "1" + "0" * 30, "true", "false"):
        claims = _b64e(f'{{"exp": {exp}, "sub": "UABC", "iss": "{account.public_key}", "nats": {{"type": "user"}}}}')
        path = tmp_path / "user.jwt"
        path.write_text(f"{head}.{claims}.{_b64e_bytes(account.sign(f'{head}.{claims}'.encode()))}")
        code, out = run(capsys, "server", "check", "credential", "--credential", str(path))
        line = parse_nagios(out)
        assert code == 2 and line["findings"]["Crit"][0].startswith("invalid credential: "), (exp, out)


def _b64e_bytes(raw: bytes) -> str:
    import base64

    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _b64d(text: str) -> bytes:
    import base64

    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _b64e(text: str) -> str:
    import base64

    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


# ---------------------------------------------------------------------------------------------- consumer


def test_consumer_check_thresholds_from_flags_and_metadata(capsys: pytest.CaptureFixture[str], server: NatsServer,
                                                          js: Any) -> None:
    js.create_stream(name="WORK", subjects=["work.>"], storage="memory")
    try:
        for i in range(5):
            js.publish(f"work.{i}", b"job")
        js.create_consumer("WORK", durable_name="plain", ack_wait=60.0)
        js.create_consumer("WORK", durable_name="meta", metadata={
            "io.nats.monitor.unprocessed-critical": "5", "io.nats.monitor.outstanding-ack-critical": "2",
            "io.nats.monitor.last-ack-critical": "1d", "io.nats.monitor.waiting-critical": "100"})
        s = ("--server", server.url)

        def check(name: str, *argv: str) -> tuple[int, dict[str, Any]]:
            code, out = run(capsys, "server", "check", "consumer", "--stream", "WORK", "--consumer", name, *argv, *s)
            return code, parse_nagios(out)

        code, line = check("plain")
        assert code == 0 and line["name"] == "WORK_plain" and not any(line["findings"].values()), line
        assert {k: v[0] for k, v in line["perf"].items()} == {"ack_pending": 0, "pull_waiting": 0, "pending": 5,
                                                              "redelivered": 0}
        code, line = check("plain", "--unprocessed-critical", "5", "--last-delivery-critical", "1h")
        assert code == 2 and line["findings"]["Crit"] == ["Unprocessed Messages: 5", "No deliveries"], line
        assert line["perf"]["pending"][3] == "5"
        # Thresholds from the consumer's metadata; one given on the command line wins over it.
        code, line = check("meta")
        assert code == 2 and line["findings"]["Crit"] == ["Unprocessed Messages: 5", "No acks"], line
        assert line["findings"]["OK"] == ["Ack Pending: 0", "Waiting Pulls: 0"]
        code, line = check("meta", "--unprocessed-critical", "6", "--last-ack-critical", "0")
        assert code == 0 and line["findings"]["OK"] == ["Ack Pending: 0", "Waiting Pulls: 0",
                                                         "Unprocessed Messages: 5"], line
        # Delivered, not acked: ack pending, last delivery just now.
        msgs = list(js.consumer("WORK", "meta").fetch(3, max_wait=5))
        assert len(msgs) == 3
        code, line = check("meta", "--unprocessed-critical", "6", "--last-delivery-critical", "1h",
                           "--last-ack-critical", "0")
        assert code == 2 and line["findings"]["Crit"] == ["Ack Pending: 3"], line
        assert line["findings"]["OK"][-1].startswith("Last delivery ") and "last_delivery" in line["perf"]
        msgs[0].ack_sync(timeout=5)
        code, line = check("meta", "--unprocessed-critical", "6", "--outstanding-ack-critical", "3")
        assert code == 0 and line["perf"]["last_ack"][1] == "s", line
        assert [f for f in line["findings"]["OK"] if f.startswith("Last ack ")], line
        # Metadata the nats CLI cannot read: CRITICAL, saying which key.
        js.create_consumer("WORK", durable_name="bad", metadata={"io.nats.monitor.waiting-critical": "many"})
        code, line = check("bad")
        assert code == 2 and "io.nats.monitor.waiting-critical" in line["findings"]["Crit"][0], line
        code, line = check("missing")
        assert code == 2 and line["findings"]["Crit"][0].startswith("could not load info: "), line
    finally:
        js.delete_stream("WORK")


@pytest.mark.server("2.11")
def test_consumer_check_pinned(capsys: pytest.CaptureFixture[str], server: NatsServer, js: Any) -> None:
    js.create_stream(name="PIN", subjects=["pin.>"], storage="memory")
    try:
        js.publish("pin.1", b"x")
        js.create_consumer("PIN", durable_name="P", priority_policy="pinned_client", priority_groups=["g"],
                           priority_timeout=60.0)
        js.create_consumer("PIN", durable_name="plain")
        js.create_consumer("PIN", durable_name="M", metadata={"io.nats.monitor.pinned": "true"})
        s = ("--server", server.url)

        def check(name: str, *argv: str) -> tuple[int, dict[str, Any]]:
            code, out = run(capsys, "server", "check", "consumer", "--stream", "PIN", "--consumer", name, *argv, *s)
            return code, parse_nagios(out)

        code, line = check("P", "--pinned")
        assert code == 2 and line["findings"]["Crit"] == ["0 / 1 pinned clients"], line
        assert line["perf"]["groups"][0] == 1 and line["perf"]["pinned_groups"][0] == 0
        code, line = check("plain", "--pinned")
        assert code == 2 and line["findings"]["Crit"] == ["Not pinned client priority mode"], line
        assert "groups" not in line["perf"]
        code, line = check("M")  # --pinned from the metadata
        assert code == 2 and line["findings"]["Crit"] == ["Not pinned client priority mode"], line
        assert len(list(js.consumer("PIN", "P").fetch(1, max_wait=5, group="g"))) == 1
        code, line = check("P", "--pinned")
        assert code == 0 and line["findings"]["OK"] == ["1 pinned clients"], line
        assert line["perf"]["pinned_groups"][0] == 1
    finally:
        js.delete_stream("PIN")


def test_stream_check_thresholds_from_metadata(capsys: pytest.CaptureFixture[str], server: NatsServer,
                                               js: Any) -> None:
    js.create_stream(name="META", subjects=["meta.>"], storage="memory",
                     metadata={"io.nats.monitor.msgs-warn": "5", "io.nats.monitor.msgs-critical": "2"})
    try:
        js.publish("meta.1", b"x")
        js.publish("meta.2", b"x")
        js.publish("meta.3", b"x")
        s = ("--server", server.url)
        code, out = run(capsys, "server", "check", "stream", "--stream", "META", *s)
        line = parse_nagios(out)
        assert code == 1 and line["findings"]["Warn"] == ["messages 3 <= 5"] and line["perf"]["messages"][2:] == (
            "5", "2"), out
        code, out = run(capsys, "server", "check", "stream", "--stream", "META", "--msgs-warn", "1", *s)
        assert code == 0, out
    finally:
        js.delete_stream("META")


def test_stream_check_messages_and_subjects_thresholds_as_the_nats_cli_compares(
        capsys: pytest.CaptureFixture[str], server: NatsServer, js: Any) -> None:
    # As many messages as the threshold crosses it (<=, not <); subjects are compared from above
    # when the warning threshold is under the critical one, else from below (fewer is worse).
    js.create_stream(name="LEVELS", subjects=["levels.>"], storage="memory")
    try:
        for i in range(3):
            js.publish(f"levels.{i}", b"x")
        s = ("--server", server.url)

        def check(*argv: str) -> tuple[int, dict[str, Any]]:
            code, out = run(capsys, "server", "check", "stream", "--stream", "LEVELS", *argv, *s)
            return code, parse_nagios(out)

        code, line = check("--msgs-critical", "3")
        assert code == 2 and line["findings"]["Crit"] == ["messages 3 <= 3"], line
        assert check("--msgs-warn", "3")[0] == 1 and check("--msgs-warn", "2")[0] == 0
        code, line = check("--subjects-warn", "10", "--subjects-critical", "5")  # too few subjects
        assert code == 2 and line["findings"]["Crit"] == ["subjects 3 <= 5"], line
        assert check("--subjects-warn", "3", "--subjects-critical", "1")[0] == 1
        assert check("--subjects-warn", "2", "--subjects-critical", "1")[0] == 0
        code, line = check("--subjects-warn", "2", "--subjects-critical", "5")  # too many subjects
        assert code == 1 and line["findings"]["Warn"] == ["subjects 3 >= 2"], line
        assert check("--subjects-warn", "2", "--subjects-critical", "3")[0] == 2
        assert check("--subjects-critical", "4")[0] == 0 and check("--subjects-critical", "3")[0] == 2
        assert check("--subjects-warn", "2")[0] == 0  # a warning threshold alone: fewer is worse
    finally:
        js.delete_stream("LEVELS")


# ---------------------------------------------------------------------------------------------- formats


def test_every_format_of_a_check_run_by_the_command_line(capsys: pytest.CaptureFixture[str], server: NatsServer,
                                                         js: Any, tmp_path: Path) -> None:
    js.create_key_value(bucket="FMT", storage="memory").put("k", b"v")
    try:
        s = ("--server", server.url)
        ok = ("kv", "--bucket", "FMT", "--key", "k")
        bad = ("kv", "--bucket", "FMT", "--key", "missing", "--values-warn", "1", "--values-critical", "5")

        # JSON: the nats CLI's fields; --format before or after the kind.
        code, out = run(capsys, "server", "check", "--format", "json", *ok, *s)
        doc = json.loads(out)
        assert code == 0 and list(doc) == ["status", "check_suite", "check_name", "ok", "perf_data"], doc
        assert (doc["status"], doc["check_suite"], doc["check_name"]) == ("OK", "kv", "FMT")
        assert doc["ok"] == ["bucket FMT", "key k found"]
        assert doc["perf_data"][0] == {"name": "values", "value": 1, "warning": 0, "critical": 0}
        assert {"name": "bytes", "unit": "B"}.items() <= doc["perf_data"][1].items()
        code, out = run(capsys, "server", "check", *bad, *s, "--format", "json")
        doc = json.loads(out)
        assert code == 2 and doc["status"] == "CRITICAL" and doc["critical"] == ["key missing not found"], doc
        assert doc["warning"] == ["1 values"] and "ok" in doc

        # Prometheus: a gauge per perfdata item and the status code; exit code 0 even when CRITICAL.
        code, out = run(capsys, "server", "check", *bad, *s, "--format", "prometheus")
        metrics = parse_prometheus(out)
        assert code == 0, out
        assert metrics["nats_server_check_kv_status_code"] == ("gauge", {"item": "FMT", "status": "CRITICAL"}, 2.0)
        assert metrics["nats_server_check_kv_values"] == ("gauge", {"item": "FMT"}, 1.0)
        assert set(metrics) == {"nats_server_check_kv_status_code", "nats_server_check_kv_values",
                                "nats_server_check_kv_bytes", "nats_server_check_kv_replicas"}
        assert "# HELP nats_server_check_kv_values How many values are stored in the bucket\n" in out
        code, out = run(capsys, "server", "check", "--namespace", "acme", "--format", "prometheus", *ok, *s)
        assert code == 0 and parse_prometheus(out)["acme_kv_status_code"][2] == 0.0

        # Connection: the nats CLI's suite name ("connections") in the metric names.
        code, out = run(capsys, "server", "check", "conn", "--format", "prometheus", "--connect-warn", "10s",
                        "--connect-critical", "20s", "--rtt-warn", "10s", "--rtt-critical", "20s",
                        "--req-warn", "10s", "--req-critical", "20s", *s)
        assert {"nats_server_check_connections_connect_time", "nats_server_check_connections_rtt",
                "nats_server_check_connections_request_time"} <= set(parse_prometheus(out)), out

        # Text, for people.
        code, out = run(capsys, "server", "check", *ok, *s, "--format", "text")
        assert code == 0 and out.startswith("FMT: OK\n") and "Check Metrics" in out

        # --outfile: the file, replaced whole, mode 0600; nothing on stdout; the exit code as without.
        target = tmp_path / "kv.prom"
        target.write_text("stale")
        code, out = run(capsys, "server", "check", *bad, *s, "--format", "prometheus", "--outfile", str(target))
        assert code == 0 and out == "" and stat.S_IMODE(os.stat(target).st_mode) == 0o600
        assert parse_prometheus(target.read_text())["nats_server_check_kv_status_code"][2] == 2.0
        code, out = run(capsys, "server", "check", *bad, *s, "--outfile", str(tmp_path / "kv.txt"))
        assert code == 2 and out == "" and parse_nagios((tmp_path / "kv.txt").read_text())["status"] == "CRITICAL"
        code, out = run(capsys, "server", "check", *ok, *s, "--outfile", str(tmp_path / "no" / "such" / "dir"))
        assert code == 1
        # A name that is not UTF-8 on the command line (a surrogate escape): written as given, as to stdout.
        odd = tmp_path / "odd.txt"
        code, out = run(capsys, "server", "check", "kv", "--bucket", "odd\udcff", *s, "--outfile", str(odd))
        assert code == 2 and out == "" and odd.read_bytes().startswith(b"CRITICAL odd\xff Crit:"), odd.read_bytes()
    finally:
        js.delete_key_value("FMT")


def test_jetstream_check_perfdata_has_the_nats_cli_names(capsys: pytest.CaptureFixture[str], server: NatsServer,
                                                         js: Any) -> None:
    js.create_stream(name="ONE", subjects=["one.>"], storage="memory")
    try:
        code, out = run(capsys, "server", "check", "js", "--format", "prometheus", "--server", server.url)
        metrics = parse_prometheus(out)
        prefix = "nats_server_check_jetstream_"
        expected = {f"{prefix}{what}{pct}" for what in ("memory", "storage", "streams", "consumers")
                    for pct in ("", "_pct")}
        expected |= {f"{prefix}replicas_{what}" for what in ("ok", "no_leader", "missing_replicas", "lagged",
                                                             "not_seen", "fail")}
        assert code == 0 and set(metrics) == expected | {f"{prefix}status_code"}, sorted(metrics)
        assert metrics[f"{prefix}status_code"][1] == {"item": "JetStream", "status": "OK"}
        assert metrics[f"{prefix}replicas_ok"][2] >= 1 and metrics[f"{prefix}streams"][2] >= 1
        code, out = run(capsys, "server", "check", "js", "--server", server.url)
        perf = parse_nagios(out)["perf"]
        assert code == 0 and perf["memory"][1] == "B" and perf["memory_pct"] == (0.0, "%", "75", "90"), out
    finally:
        js.delete_stream("ONE")


def test_jetstream_check_limits_as_the_nats_cli_compares(capsys: pytest.CaptureFixture[str]) -> None:
    # An account allowed 4 streams that has 3 (75%): the whole percent *over* a threshold crosses
    # it, a threshold below 0 is off, a warning threshold not below the critical one is CRITICAL;
    # --replicas as well as --no-replicas.
    limits = {"max_streams": 4, "max_mem": 1 << 20, "max_file": 1 << 20}
    config = {"accounts": {"LIM": {"jetstream": limits, "users": [{"user": "lim", "password": "lim"}]}}}
    with NatsServer(jetstream=True, config=config) as srv:
        with nats.connect(srv.url, user="lim", password="lim") as nc:
            js = nc.jetstream(timeout=10.0)
            for i in range(3):
                js.create_stream(name=f"LIM{i}", subjects=[f"lim{i}"], storage="memory")
        s = ("--server", srv.url, "--user", "lim", "--password", "lim")

        def check(*argv: str) -> tuple[int, dict[str, Any]]:
            code, out = run(capsys, "server", "check", "jetstream", *argv, *s)
            return code, parse_nagios(out)

        code, line = check("--streams-warn", "75", "--streams-critical", "90")
        assert code == 0 and line["perf"]["streams_pct"] == (75.0, "%", "75", "90"), line
        assert check("--streams-warn", "74", "--streams-critical", "90")[0] == 1
        assert check("--streams-warn", "50", "--streams-critical", "74.5")[0] == 2
        code, line = check("--streams-warn", "-1", "--streams-critical", "-1")
        assert code == 0 and line["perf"]["streams_pct"] == (75.0, "%", None, None), line
        code, line = check("--streams-warn", "90", "--streams-critical", "80")
        assert code == 2 and line["findings"]["Crit"][0].startswith("streams: invalid thresholds"), line
        code, line = check("--replicas")
        assert code == 0 and line["perf"]["replicas_ok"][0] == 3, line
        assert "replicas_ok" not in check("--no-replicas")[1]["perf"]


def test_request_check(capsys: pytest.CaptureFixture[str], server: NatsServer) -> None:
    with nats.connect(server.url) as nc:
        def answer(msg: Any) -> None:
            who = msg.headers.get("Who") if msg.headers else None
            msg.respond(b"pong " + msg.data, headers={"Served-By": "svc-1", "Who": who or "-"})

        nc.subscribe("svc.ping", cb=answer)
        nc.flush()
        s = ("--server", server.url)
        code, out = run(capsys, "server", "check", "req", "--subject", "svc.ping", "--payload", "hi",
                        "--headers", "Who=me", "--match-payload", "^pong hi$", "--match-headers", "Served-By:svc-1",
                        "--match-headers", "Who=me", "--response-warn", "20s", "--response-critical", "30s", *s)
        line = parse_nagios(out)
        assert code == 0 and line["name"] == "svc.ping" and line["findings"]["OK"] == ["Valid response"], out
        value, unit, warn, crit = line["perf"]["time"]
        assert unit == "s" and value < 20 and (warn, crit) == ("20.0000", "30.0000")
        code, out = run(capsys, "server", "check", "request", "--subject", "svc.ping", "--match-payload", "nope",
                        "--match-headers", "Served-By=svc-2", *s)
        assert code == 2 and parse_nagios(out)["findings"]["Crit"] == [
            "response does not match regexp", 'invalid header "Served-By" = "svc-1"'], out
        # Nobody answers: CRITICAL, whatever the format's exit code says.
        code, out = run(capsys, "server", "check", "request", "--subject", "svc.nobody", "--timeout", "2", *s,
                        "--format", "json")
        doc = json.loads(out)
        assert code == 2 and doc["check_suite"] == "request" and doc["critical"][0].startswith("could not send"), doc
        code, out = run(capsys, "server", "check", "request", "--subject", "svc.nobody", "--timeout", "2", *s,
                        "--format", "prometheus")
        assert code == 0 and parse_prometheus(out)["nats_server_check_request_status_code"][2] == 2.0


def test_a_message_subject_is_literal_as_the_server_takes_it() -> None:
    from natsjs_sync.monitor.check import _LITERAL_SUBJECT

    assert [s for s in ("a", "a.b", "a*b.c", "a>", "orders.eu-1") if not _LITERAL_SUBJECT.fullmatch(s)] == []
    assert [s for s in (">", "a.>", "a.*", "*.a", "a..b", ".a", "a.", "a b", "") if _LITERAL_SUBJECT.fullmatch(s)] == []
