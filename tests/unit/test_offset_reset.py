"""groupd-groups' reset rules, one Kafka fact each (GroupOffsetsResetter, ConsumerGroupCommand, CsvUtils)."""

import pytest
from kafka import TopicPartition

from groupd.cli import offset_reset as r

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def test_topic_args_whole_and_named_partitions():
    assert r.split_topic_args(["a", "b:0,2"]) == (["a"], [TopicPartition("b", 0), TopicPartition("b", 2)])
    with pytest.raises(r.UsageError, match="Invalid partition 'x' specified in topic arg 'b:x'"):
        r.split_topic_args(["b:x"])
    with pytest.raises(r.UsageError, match="expected topic name and partitions"):
        r.split_topic_args(["a:1:2"])


def test_datetime_is_utc_without_a_zone_and_honours_one():
    assert r.parse_datetime("2020-01-01T00:00:00.000") == 1577836800000
    assert r.parse_datetime("2020-01-01T00:00:00") == 1577836800000
    assert r.parse_datetime("2020-01-01T01:00:00.500+01:00") == 1577836800500
    assert r.parse_datetime("2020-01-01T00:00:00.000Z") == 1577836800000
    with pytest.raises(r.UsageError, match="does not contain a 'T'"):
        r.parse_datetime("2020-01-01 00:00:00")


def test_duration_is_iso8601():
    assert r.parse_duration_ms("PT1H") == 3_600_000
    assert r.parse_duration_ms("P1DT2H3M4S") == 93_784_000
    assert r.parse_duration_ms("PT0.5S") == 500
    assert r.parse_duration_ms("-PT1M") == -60_000
    with pytest.raises(r.UsageError):
        r.parse_duration_ms("1h")


def test_clamp_to_the_log_as_kafka_does_with_a_warning():
    warnings = []
    got = r.clamp({T0: 99, T1: -5}, {T0: 0, T1: 2}, {T0: 10, T1: 10}, warnings.append)
    assert got == {T0: 10, T1: 2}
    assert warnings == [
        "New offset (99) is higher than latest offset for topic partition t-0. Value will be set to 10.",
        "New offset (-5) is lower than earliest offset for topic partition t-1. Value will be set to 2.",
    ]
    assert r.clamp({T0: 4}, {T0: 0}, {T0: 10}, warnings.append) == {T0: 4}


def test_csv_round_trip_in_both_of_kafkas_forms():
    plan = {"g": {T0: 3, T1: 7}}
    one = r.export_csv(plan, with_group=False)
    assert one == "t,0,3\nt,1,7\n"
    assert r.parse_csv(one, ["g"]) == plan
    many = r.export_csv({"g": {T0: 3}, "h": {T1: 1}}, with_group=True)
    assert many == "g,t,0,3\nh,t,1,1\n"
    assert r.parse_csv(many, ["g", "h"]) == {"g": {T0: 3}, "h": {T1: 1}}
    with pytest.raises(r.UsageError, match="Cannot parse reset plan line"):
        r.parse_csv("g,t,zero,3\n", ["g"])
