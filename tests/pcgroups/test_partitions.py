"""Partition assignment, names and config JSON, with no server: what every member must agree on."""

from __future__ import annotations

import json

import msgspec
import pytest

from natsjs_sync import pcgroups
from natsjs_sync.pcgroups import MemberMapping, PartitioningFilter


def _owned(members: list[str], n: int) -> dict[str, list[int]]:
    return {m: [int(f.split(".")[0]) for f in pcgroups.generate_partition_filters(members, n, [], m)]
            for m in members}


def test_balanced_assignment_runs_then_remainder_from_the_front() -> None:
    # sorted and deduplicated: c, a, b, a -> a, b, c; runs of 10 // 3 = 3, partition 9 to a.
    assert _owned(["c", "a", "b", "a"], 10) == {"a": [0, 1, 2, 9], "b": [3, 4, 5], "c": [6, 7, 8], }
    assert _owned(["a", "b"], 4) == {"a": [0, 1], "b": [2, 3]}
    # More members than partitions: the first max_members (sorted) get one each.
    assert _owned(["d", "c", "b", "a"], 2) == {"a": [0], "b": [1], "c": [], "d": []}
    assert pcgroups.generate_partition_filters(["a"], 2, [], "a", "orders.*") == ["0.orders.*", "1.orders.*"]


def test_every_partition_has_exactly_one_owner_whatever_the_membership() -> None:
    for n in (1, 2, 3, 7, 16):
        for k in range(1, 20):
            names = [f"m{i}" for i in range(k)]
            owned = _owned(names, n)
            flat = sorted(p for ps in owned.values() for p in ps)
            assert flat == list(range(n)), (n, k)


def test_mappings_give_whole_partitions_once_per_member() -> None:
    mappings = [MemberMapping(member="x", partitions=(0, 2)), MemberMapping(member="y", partitions=(1,))]
    assert pcgroups.generate_partition_filters([], 3, mappings, "x", "a.*") == ["0.>", "2.>"]
    cfg = pcgroups.StaticConsumerGroupConfig(max_members=3, filters=("a.*", "b.*"), member_mappings=tuple(mappings))
    # The same "<p>.>" for both filters is asked for once (the server refuses overlapping filters).
    assert pcgroups.static_get_partition_filters(cfg, "x") == ["0.>", "2.>"]


def test_transform_destination_and_names() -> None:
    assert pcgroups.partitioning_transform_destination("foo.*.*", [1], 4) == \
        "{{Partition(4,1)}}.foo.{{Wildcard(1)}}.{{Wildcard(2)}}"
    assert pcgroups.partitioning_transform_destination("foo.*.>", [], 3) == "{{Partition(3)}}.foo.{{Wildcard(1)}}.>"
    assert pcgroups.partitioning_transform_destination(">", [], 2) == "{{Partition(2)}}.>"
    assert pcgroups.compose_key("S", "g") == "S.g"
    assert pcgroups.compose_static_consumer_name("g", "m") == "g-m"
    assert pcgroups.compose_group_stream_name("S", "g") == "S-g"
    assert pcgroups.strip_partition("3.orders.k1") == "orders.k1"
    assert pcgroups.strip_partition("nodot") == "nodot"


def test_config_json_is_orbits_and_keeps_unknown_fields() -> None:
    raw = {"max_members": 4, "partitioning_filters": [{"filter": "o.*", "partitioning_wildcards": [1]}],
           "max_buffered_msg": 10, "members": ["a"], "later": True}
    cfg = pcgroups.ElasticConsumerGroupConfig.from_json(json.dumps(raw).encode(), 7)
    assert cfg.partitioning_filters == (PartitioningFilter(filter="o.*", partitioning_wildcards=(1,)),)
    assert cfg.max_buffered_msgs == 10 and cfg.revision == 7
    assert cfg.to_json() == raw
    bare = pcgroups.ElasticConsumerGroupConfig(max_members=2)
    assert bare.to_json() == {"max_members": 2, "partitioning_filters": None}
    st = pcgroups.StaticConsumerGroupConfig(max_members=2, members=("a",))
    assert st.to_json() == {"max_members": 2, "members": ["a"]}


def test_a_rewrite_keeps_what_another_client_wrote_for_what_it_did_not_change() -> None:
    # orbit.go writes a nil filter list (its CLI with no filter) and nil wildcards as null,
    # natsio-pcgroups "no limit" as -1; orbit.go's members compare the fixed part exactly.
    go = (b'{"max_members":4,"partitioning_filters":[{"filter":"o.*","partitioning_wildcards":null}],'
          b'"max_buffered_msg":-1,"later":{"x":[]}}')
    stored = json.loads(go)
    cfg = pcgroups.ElasticConsumerGroupConfig.from_json(go, 3)
    assert cfg.max_buffered_msgs == 0 and cfg.partitioning_filters == (PartitioningFilter(filter="o.*"),)
    joined = msgspec.structs.replace(cfg, members=("b", "a"))
    assert json.dumps(joined.to_json(as_stored=stored), separators=(",", ":")).encode() == go[:-1] + \
        b',"members":["b","a"]}'
    bare = b'{"max_members":2,"partitioning_filters":null}'
    left = msgspec.structs.replace(pcgroups.ElasticConsumerGroupConfig.from_json(bare), members=("a",))
    assert left.to_json(as_stored=json.loads(bare)) == {"max_members": 2, "partitioning_filters": None,
                                                         "members": ["a"]}
    # What did change is written this client's way: a limit set, the members gone.
    changed = msgspec.structs.replace(cfg, max_buffered_msgs=5, members=())
    assert changed.to_json(as_stored=stored)["max_buffered_msg"] == 5
    assert "members" not in msgspec.structs.replace(joined, members=()).to_json(
        as_stored=joined.to_json(as_stored=stored))


def test_configs_are_compared_by_meaning_not_spelling() -> None:
    natsio = pcgroups.ElasticConsumerGroupConfig.from_json(
        {"max_members": 4, "max_buffered_msg": -1, "max_buffered_bytes": -1})
    go = pcgroups.ElasticConsumerGroupConfig.from_json({"max_members": 4, "partitioning_filters": None})
    assert natsio.fixed_part() == go.fixed_part() == pcgroups.ElasticConsumerGroupConfig(
        max_members=4, max_buffered_msgs=-1).fixed_part()
    assert go.fixed_part() != pcgroups.ElasticConsumerGroupConfig(max_members=4, max_buffered_msgs=10).fixed_part()
    a = pcgroups.StaticConsumerGroupConfig(max_members=4, filters=("x.*", "y.*"), members=("b", "a"))
    assert a.same_group(pcgroups.StaticConsumerGroupConfig.from_json(
        {"max_members": 4, "filters": ["y.*", "x.*"], "members": ["a", "b", "a"]}))
    assert not a.same_group(pcgroups.StaticConsumerGroupConfig(max_members=4, filters=("x.*",), members=("a", "b")))
    assert not a.same_group(pcgroups.StaticConsumerGroupConfig(max_members=4, filters=("x.*", "y.*"),
                                                               members=("a", "c")))


@pytest.mark.parametrize(("raw", "match"), [
    ({"max_members": 0}, ">= 1"),
    ({"max_members": 2, "members": ["a"], "member_mappings": [{"member": "a", "partitions": [0, 1]}]}, "not both"),
    ({"max_members": 2, "member_mappings": [{"member": "a", "partitions": [0]}]}, "exactly once"),
    ({"max_members": 2, "member_mappings": [{"member": "a", "partitions": [0, 0]}]}, "only once"),
    ({"max_members": 2, "member_mappings": [{"member": "a", "partitions": [0, 5]}]}, "between 0"),
    ({"max_members": 2, "member_mappings": [{"member": "a", "partitions": [0]},
                                            {"member": "a", "partitions": [1]}]}, "unique"),
    ({"max_members": 2, "partitioning_filters": [{"filter": "a.b"}]}, "wildcard"),
    ({"max_members": 2, "partitioning_filters": [{"filter": "a.*", "partitioning_wildcards": [2]}]}, "between 1"),
    ({"max_members": 2, "partitioning_filters": [{"filter": "a.*", "partitioning_wildcards": [1, 1]}]}, "larger"),
])
def test_configs_breaking_the_rules_are_refused(raw: dict[str, object], match: str) -> None:
    with pytest.raises(pcgroups.ConsumerGroupConfigError, match=match):
        pcgroups.ElasticConsumerGroupConfig.from_json(raw)


def test_not_a_config_is_a_group_error_not_a_decoding_error() -> None:
    for bad in (b"{", b"[1]", b'{"max_members": "x"}', b'{"max_members": 1, "member_mappings": [{}]}'):
        with pytest.raises(pcgroups.ConsumerGroupError):
            pcgroups.StaticConsumerGroupConfig.from_json(bad)


def test_wildcards_given_as_a_list_are_the_group_read_back_from_the_bucket() -> None:
    # A caller's list (the annotation says tuple; JSON gives lists) is the same group as the
    # tuple decoded from the bucket: create_elastic called again must not see another group.
    given = pcgroups.ElasticConsumerGroupConfig(max_members=4, partitioning_filters=(
        PartitioningFilter(filter="a.*.*", partitioning_wildcards=[2, 1]),))  # type: ignore[arg-type]
    read = pcgroups.ElasticConsumerGroupConfig.from_json(json.dumps(given.to_json()).encode())
    assert given.fixed_part() == read.fixed_part()
    # The order of the wildcards is the order of the partitioning key: another group.
    assert read.fixed_part() != pcgroups.ElasticConsumerGroupConfig(max_members=4, partitioning_filters=(
        PartitioningFilter(filter="a.*.*", partitioning_wildcards=(1, 2)),)).fixed_part()


@pytest.mark.parametrize("name", ["", "a.b", "a*", ">", "a b", "a\tb", "a/b", "a\\b", "a\x07", " "])
def test_names_that_are_not_nats_tokens_are_refused_as_value_errors(name: str) -> None:
    from natsjs_sync.pcgroups.partitions import is_valid_name, require_member_names

    assert not is_valid_name(name)
    with pytest.raises(ValueError, match="invalid member name"):
        require_member_names(["ok", name])
    assert all(is_valid_name(n) for n in ("m1", "pool-3", "A-b_c"))
