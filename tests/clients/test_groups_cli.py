"""groupd-groups (like kafka-consumer-groups.sh) against groupd."""

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from groupd.cli.groups_cli import main
from tests.clients.kp import ChildConsumer, wait_until
from tests.clients.test_consumer_protocol import kip848_broker  # noqa: F401  (a fixture, for the consumer-protocol test)

pytestmark = pytest.mark.client


def run(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


# Kafka's headers (ConsumerGroupCommand's printf formats), the columns scripts cut
OFFSETS = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
OFFSETS_VERBOSE = [
    "GROUP",
    "TOPIC",
    "PARTITION",
    "LEADER-EPOCH",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "CONSUMER-ID",
    "HOST",
    "CLIENT-ID",
]
MEMBERS = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
MEMBERS_VERBOSE = MEMBERS + ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
STATE = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
STATE_VERBOSE = [
    "GROUP",
    "COORDINATOR (ID)",
    "ASSIGNMENT-STRATEGY",
    "STATE",
    "GROUP-EPOCH",
    "TARGET-ASSIGNMENT-EPOCH",
    "#MEMBERS",
]


def rows(out):
    """The data rows of one of Kafka's tables (it starts with a blank line, then the header)."""
    return [line.split() for line in out.splitlines() if line.strip()][1:]


def produce(bs, topic, partitions, count):
    admin = KafkaAdminClient(bootstrap_servers=bs)
    admin.create_topics([NewTopic(topic, partitions, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bs)
    for i in range(count):
        producer.send(topic, value=b"x", partition=i % partitions)
    producer.flush()
    return producer


def member_of(bs, topic, group, expect):
    member = ChildConsumer(
        bs,
        topic,
        commit=True,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=300,
    )
    wait_until(lambda: len(member.values()) == expect, 30, f"the member of {group} to read {expect} records")
    return member


@pytest.mark.scenario("groupd-groups", 9)
def test_list_describe_reset_delete(broker_process, capsys):
    bs = broker_process.bootstrap
    producer = produce(bs, "cli", 2, 10)
    member = member_of(bs, "cli", "cli-g", 10)
    code, out, _ = run(capsys, "--bootstrap-server", bs, "--list")
    assert code == 0 and "cli-g" in out.split()
    code, out, _ = run(capsys, "--bootstrap-server", bs, "--describe", "--group", "cli-g", "--state")
    assert "Stable" in out and "range" in out
    code, out, _ = run(capsys, "--bootstrap-server", bs, "--describe", "--group", "cli-g", "--members")
    assert "#PARTITIONS" in out and " 2" in out
    code, out, _ = run(capsys, "--bootstrap-server", bs, "--delete", "--group", "cli-g")
    assert code == 1 and "* Group 'cli-g' could not be deleted due to: NonEmptyGroupError" in out, "NON_EMPTY_GROUP"
    code, _, err = run(
        capsys,
        "--bootstrap-server",
        bs,
        "--reset-offsets",
        "--group",
        "cli-g",
        "--topic",
        "cli",
        "--to-earliest",
        "--execute",
    )
    assert code == 1
    member.stop()
    producer.send("cli", value=b"y", partition=0).get(10)
    code, out, err = run(capsys, "--bootstrap-server", bs, "--describe", "--group", "cli-g")
    assert "Consumer group 'cli-g' has no active members." in err
    lag = {int(cols[2]): int(cols[5]) for cols in rows(out)}
    assert lag == {0: 1, 1: 0}, out
    code, out, err = run(
        capsys, "--bootstrap-server", bs, "--reset-offsets", "--group", "cli-g", "--topic", "cli", "--to-earliest"
    )
    assert "WARN: No action will be performed as the --execute option is missing." in err
    assert {int(c[2]): int(c[3]) for c in rows(out)} == {0: 0, 1: 0}
    code, out, _ = run(capsys, "--bootstrap-server", bs, "--describe", "--group", "cli-g", "--offsets")
    assert {int(c[2]): int(c[3]) for c in rows(out)} == {0: 5, 1: 5}, "a dry run changes nothing"
    code, out, _ = run(
        capsys,
        "--bootstrap-server",
        bs,
        "--reset-offsets",
        "--group",
        "cli-g",
        "--topic",
        "cli",
        "--to-offset",
        "2",
        "--execute",
    )
    code, out, _ = run(capsys, "--bootstrap-server", bs, "--describe", "--group", "cli-g", "--offsets")
    assert {int(c[2]): int(c[3]) for c in rows(out)} == {0: 2, 1: 2}
    code, out, _ = run(capsys, "--bootstrap-server", bs, "--delete", "--group", "cli-g")
    assert code == 0 and out == "Deletion of requested consumer groups ('cli-g') was successful.\n"
    code, out, _ = run(capsys, "--bootstrap-server", bs, "--list")
    assert "cli-g" not in out.split()
    producer.close()


@pytest.mark.scenario("groupd-groups", 9)
def test_headers_and_columns_are_kafkas(broker_process, capsys):
    """Each view's header is Kafka's, word for word, and each row has a value (or ``-``) per column."""
    bs = broker_process.bootstrap
    producer = produce(bs, "cols", 2, 4)
    member = member_of(bs, "cols", "cols-g", 4)
    try:
        for flags, expected in (
            (["--offsets"], OFFSETS),
            (["--offsets", "--verbose"], OFFSETS_VERBOSE),
            (["--members"], MEMBERS),
            (["--members", "--verbose"], MEMBERS_VERBOSE),
            (["--state"], STATE),
            (["--state", "--verbose"], STATE_VERBOSE),
        ):
            code, out, _ = run(capsys, "--bootstrap-server", bs, "--describe", "--group", "cols-g", *flags)
            assert code == 0 and out.startswith("\n"), (flags, out)
            lines = [line for line in out.splitlines() if line.strip()]
            assert _words(lines[0]) == _words(" ".join(expected)), (flags, lines[0])
            if flags[0] != "--state":
                assert all(len(line.split()) == len(expected) for line in lines[1:]), (flags, out)
        code, out, _ = run(
            capsys, "--bootstrap-server", bs, "--describe", "--group", "cols-g", "--members", "--verbose"
        )
        assert "cols:0,1" in out, "CURRENT-ASSIGNMENT as Kafka writes it: topic:partitions"
        code, out, _ = run(capsys, "--bootstrap-server", bs, "--describe", "--group", "cols-g", "--state")
        row = [line for line in out.splitlines() if line.strip()][1]
        assert "(1)" in row and row.split()[0] == "cols-g" and row.split()[-2:] == ["Stable", "1"], row
        code, out, _ = run(capsys, "--bootstrap-server", bs, "--list", "--state")
        assert out.splitlines()[0].split() == ["GROUP", "STATE"] and ["cols-g", "Stable"] in [
            line.split() for line in out.splitlines()
        ]
        code, out, _ = run(capsys, "--bootstrap-server", bs, "--list", "--type", "--state")
        assert ["cols-g", "Classic", "Stable"] in [line.split() for line in out.splitlines()]
        code, out, _ = run(capsys, "--bootstrap-server", bs, "--list", "--state", "empty")
        assert out.splitlines() == ["GROUP                     STATE               "], "filtered: the header alone"
        code, out, _ = run(capsys, "--bootstrap-server", bs, "--list", "--type", "consumer")
        assert "cols-g" not in out
        code, out, _ = run(capsys, "--bootstrap-server", bs, "--describe", "--all-groups")
        assert {r[0] for r in rows(out)} == {"cols-g"}
    finally:
        member.stop()
        producer.close()


def _words(text):
    return text.replace("COORDINATOR (ID)", "COORDINATOR_(ID)").split()


@pytest.mark.scenario("groupd-groups", 9)
def test_reset_scenarios_clamp_export_and_from_file(broker_process, capsys, tmp_path):
    bs = broker_process.bootstrap
    producer = produce(bs, "rs", 2, 10)  # 5 records a partition
    member_of(bs, "rs", "rs-g", 10).stop()
    base = ["--bootstrap-server", bs, "--reset-offsets", "--group", "rs-g"]

    def plan(*flags):
        code, out, err = run(capsys, *base, *flags)
        assert code == 0, out + err
        return {(c[1], int(c[2])): int(c[3]) for c in rows(out)}, err

    got, err = plan("--topic", "rs", "--to-offset", "99", "--dry-run")
    assert got == {("rs", 0): 5, ("rs", 1): 5}
    assert "New offset (99) is higher than latest offset for topic partition rs-0. Value will be set to 5." in err
    assert plan("--topic", "rs:1", "--to-offset", "3", "--dry-run")[0] == {("rs", 1): 3}, (
        "topic:partitions limits the scope"
    )
    got, err = plan("--all-topics", "--shift-by", "-7", "--dry-run")
    assert got == {("rs", 0): 0, ("rs", 1): 0} and "lower than earliest offset" in err
    assert plan("--all-topics", "--shift-by", "-2", "--execute")[0] == {("rs", 0): 3, ("rs", 1): 3}
    assert plan("--all-topics", "--to-current", "--dry-run")[0] == {("rs", 0): 3, ("rs", 1): 3}
    assert plan("--all-topics", "--to-latest", "--dry-run")[0] == {("rs", 0): 5, ("rs", 1): 5}
    assert plan("--all-topics", "--to-datetime", "2000-01-01T00:00:00.000", "--dry-run")[0] == {
        ("rs", 0): 0,
        ("rs", 1): 0,
    }
    got, err = plan("--all-topics", "--to-datetime", "2999-01-01T00:00:00.000", "--dry-run")
    assert (
        got == {("rs", 0): 5, ("rs", 1): 5}
        and "Partition 0 from topic rs is empty. Falling back to latest known offset." in err
    )
    assert plan("--all-topics", "--by-duration", "P365D", "--dry-run")[0] == {("rs", 0): 0, ("rs", 1): 0}
    code, out, _ = run(capsys, *base, "--all-topics", "--to-earliest", "--dry-run", "--export")
    assert out == "rs,0,0\nrs,1,0\n", "Kafka's CSV: topic,partition,offset for one group, no header"
    csv = tmp_path / "plan.csv"
    csv.write_text("rs,0,1\nrs,1,99\n")
    got, err = plan("--from-file", str(csv), "--execute")
    assert got == {("rs", 0): 1, ("rs", 1): 5}, "a file's offsets are bounded by the log too"
    code, out, _ = run(capsys, "--bootstrap-server", bs, "--describe", "--group", "rs-g")
    assert {int(c[2]): int(c[3]) for c in rows(out)} == {0: 1, 1: 5}
    member_of(bs, "rs", "rs-h", 10).stop()
    code, out, _ = run(
        capsys,
        "--bootstrap-server",
        bs,
        "--reset-offsets",
        "--group",
        "rs-g",
        "--group",
        "rs-h",
        "--all-topics",
        "--to-offset",
        "2",
        "--export",
        "--dry-run",
    )
    assert sorted(out.splitlines()) == ["rs-g,rs,0,2", "rs-g,rs,1,2", "rs-h,rs,0,2", "rs-h,rs,1,2"], (
        "several groups: group,topic,partition,offset"
    )
    producer.close()


@pytest.mark.scenario("groupd-groups", 9)
def test_delete_offsets_and_all_groups(broker_process, capsys):
    bs = broker_process.bootstrap
    producer = produce(bs, "do", 2, 4)
    member_of(bs, "do", "do-g", 4).stop()
    code, out, _ = run(capsys, "--bootstrap-server", bs, "--delete-offsets", "--group", "do-g", "--topic", "do:1")
    assert code == 0 and out.startswith("Request succeeded for deleting offsets from group do-g.")
    assert [line.split() for line in out.splitlines() if line.strip()][1:] == [
        ["TOPIC", "PARTITION", "STATUS"],
        ["do", "1", "Successful"],
    ]
    code, out, _ = run(capsys, "--bootstrap-server", bs, "--describe", "--group", "do-g")
    assert [int(c[2]) for c in rows(out)] == [0]
    code, out, _ = run(capsys, "--bootstrap-server", bs, "--delete-offsets", "--group", "missing-g", "--topic", "do")
    assert code == 1 and "Error:" in out
    member_of(bs, "do", "do-h", 4).stop()
    code, out, _ = run(capsys, "--bootstrap-server", bs, "--delete", "--all-groups")
    assert code == 0 and "'do-g'" in out and "'do-h'" in out
    producer.close()


def test_errors_are_kafkas_words_with_a_nonzero_exit(broker_process, capsys):
    bs = broker_process.bootstrap
    code, out, _ = run(capsys, "--bootstrap-server", bs, "--describe", "--group", "nope")
    assert code == 1 and out == "\nError: Consumer group 'nope' does not exist.\n"
    code, out, _ = run(capsys, "--bootstrap-server", bs, "--delete", "--group", "nope")
    assert (
        code == 1
        and "* Group 'nope' could not be deleted due to: GroupIdNotFoundError: The group id does not exist." in out
    )
    code, out, _ = run(
        capsys,
        "--bootstrap-server",
        bs,
        "--reset-offsets",
        "--group",
        "nope",
        "--topic",
        "nosuch:0",
        "--to-offset",
        "1",
        "--dry-run",
    )
    assert code == 1 and out == '\nError: The partitions "nosuch-0" do not exist\n'
    code, out, _ = run(
        capsys,
        "--bootstrap-server",
        bs,
        "--reset-offsets",
        "--group",
        "nope",
        "--topic",
        "nosuch",
        "--to-earliest",
        "--dry-run",
    )
    assert code == 1 and out.startswith("\nError: ") and "nosuch" in out
    for argv, message in (
        (["--describe"], "Option [describe] takes one of these options: --all-groups, --group"),
        (["--list", "--describe"], "Command must include exactly one action"),
        (["--describe", "--group", "g", "--members", "--state"], "takes at most one of these options"),
        (["--reset-offsets", "--group", "g", "--topic", "t"], "requires one of the following scenarios"),
        (
            ["--reset-offsets", "--group", "g", "--to-earliest"],
            "One of the reset scopes should be defined: --all-topics, --topic.",
        ),
        (
            ["--reset-offsets", "--group", "g", "--topic", "t", "--to-earliest", "--to-latest"],
            "can't be used with option",
        ),
        (["--delete", "--group", "g", "--topic", "t"], "The consumer does not support topic-specific offset deletion"),
        (["--list", "--state", "bogus"], "Invalid state list 'bogus'. Valid states are:"),
    ):
        with pytest.raises(SystemExit) as exit_:
            main(["--bootstrap-server", bs, *argv])
        assert exit_.value.code == 2 and message in capsys.readouterr().err, argv


def test_no_traceback_when_the_broker_is_unreachable_or_the_pipe_closes(broker_process, capsys):
    import subprocess
    import sys
    import time

    from tests.harness import ROOT, free_port

    started = time.monotonic()
    code, out, err = run(capsys, "--bootstrap-server", f"127.0.0.1:{free_port()}", "--list", "--timeout", "1500")
    assert code == 1 and "could not reach" in out and "Traceback" not in out + err
    assert time.monotonic() - started < 10, "a clear message within --timeout, not a long hang"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "groupd.cli.groups_cli",
            "--bootstrap-server",
            broker_process.bootstrap,
            "--list",
            "--state",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.close()  # `groupd-groups ... | head -0`: the reader is gone before the first line
    _, err = proc.communicate(timeout=30)
    assert b"Traceback" not in err and b"BrokenPipe" not in err, err


@pytest.mark.scenario("groupd-groups", 13)
def test_command_config_reaches_a_sasl_listener(tmp_path, capsys):
    """--command-config takes Kafka's client properties, as Kafka's tools do: the group is listed
    through a SASL_PLAINTEXT listener with a PLAIN login from sasl.jaas.config."""
    from groupd.cli.groups_cli import client_settings
    from tests.clients.test_security_clients import JAAS, KP_SASL, broker_with

    proc = broker_with(
        tmp_path,
        {"SASL_PLAINTEXT": None},
        **{"sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS},
    )
    try:
        sasl = proc.bootstraps["SASL_PLAINTEXT"]
        KafkaAdminClient(bootstrap_servers=sasl, **KP_SASL).create_topics([NewTopic("cc", 1, 1)])
        member = ChildConsumer(
            sasl,
            "cc",
            commit=True,
            group_id="cc-g",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=300,
            **KP_SASL,
        )
        try:
            config = tmp_path / "client.properties"
            config.write_text(
                "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                'username="alice" password="alice-secret";\n'
            )
            assert client_settings(
                {
                    "sasl.username": "u",
                    "sasl.password": "p",
                    "ssl.ca.location": "ca.pem",
                    "ssl.keystore.location": "ks.pem",
                }
            ) == {
                "sasl_plain_username": "u",
                "sasl_plain_password": "p",
                "ssl_cafile": "ca.pem",
                "ssl_certfile": "ks.pem",
                "ssl_keyfile": "ks.pem",
            }
            wait_until(
                lambda: (
                    run(capsys, "--bootstrap-server", sasl, "--command-config", str(config), "--list")[1].split()
                    == ["cc-g"]
                ),
                30,
                "cc-g listed over SASL",
            )
        finally:
            member.stop()
    finally:
        proc.kill()


@pytest.mark.scenario("groupd-groups", 9)
def test_consumer_protocol_groups_show_epochs_and_assignments(kip848_broker, capsys):  # noqa: F811
    """A KIP-848 group, as Kafka 4's tool shows it (DescribeConsumerGroupTest): its type in --list, and from
    ConsumerGroupDescribe each member's epoch and current assignment, the group's target assignment epoch
    and each member's target (--members --verbose), the assignor, group epoch and target assignment epoch
    (--state --verbose)."""
    from tests.clients.test_consumer_protocol import consumer, owned, poll_until
    from tests.clients.test_consumer_protocol import produce as produce_records
    from tests.clients.test_other_clients import create_topic

    bs = kip848_broker.bootstrap
    create_topic(bs, "kcli", 2)
    produce_records(bs, "kcli", 10)
    members = [consumer(bs, "kcli-g", ["kcli"], **{"enable.auto.commit": False}) for _ in range(2)]
    try:
        assert poll_until(members, lambda: all(len(owned(c)) == 1 for c in members), 60)
        code, out, _ = run(capsys, "--bootstrap-server", bs, "--list", "--type", "--state")
        assert ["kcli-g", "Consumer", "Stable"] in [line.split() for line in out.splitlines()]
        code, out, _ = run(capsys, "--bootstrap-server", bs, "--describe", "--group", "kcli-g", "--state", "--verbose")
        lines = [line for line in out.splitlines() if line.strip()]
        assert code == 0 and _words(lines[0]) == _words(" ".join(STATE_VERBOSE)), out
        state = lines[1].split()
        assert state[0] == "kcli-g" and state[3:5] == ["uniform", "Stable"] and state[-1] == "2", out
        group_epoch, target_epoch = int(state[5]), int(state[6])
        assert group_epoch == target_epoch >= 2
        code, out, _ = run(
            capsys, "--bootstrap-server", bs, "--describe", "--group", "kcli-g", "--members", "--verbose"
        )
        lines = [line for line in out.splitlines() if line.strip()]
        assert code == 0 and lines[0].split() == MEMBERS_VERBOSE, out
        assignments = set()
        for line in lines[1:]:
            cols = line.split()
            assert len(cols) == len(MEMBERS_VERBOSE) and cols[0] == "kcli-g" and cols[4] == "1", line
            current_epoch, current, epoch, target = int(cols[5]), cols[6], int(cols[7]), cols[8]
            assert current_epoch == epoch == target_epoch and current == target, line
            assignments.add(current)
        assert assignments == {"kcli:0", "kcli:1"}
        code, out, _ = run(capsys, "--bootstrap-server", bs, "--describe", "--group", "kcli-g", "--members")
        assert [len(r) for r in rows(out)] == [len(MEMBERS)] * 2, out
        code, out, _ = run(capsys, "--bootstrap-server", bs, "--describe", "--group", "kcli-g")
        assert sorted(int(r[2]) for r in rows(out)) == [0, 1] and all(r[6] != "-" for r in rows(out)), out
        code, out, _ = run(capsys, "--bootstrap-server", bs, "--delete", "--group", "kcli-g")
        assert code == 1 and "NonEmptyGroupError" in out
    finally:
        for c in members:
            c.close()
    code, out, err = run(capsys, "--bootstrap-server", bs, "--describe", "--group", "kcli-g", "--state", "--verbose")
    assert "Consumer group 'kcli-g' has no active members." in err and " Empty " in out, out
