"""``groupd-groups --share`` against a broker started by the test: what Kafka's kafka-share-groups.sh shows
(--list, --list --state, --describe with start offset and lag, --members, --state, --verbose)."""

import asyncio

from groupd.cli.groups_cli import main
from tests.harness import WireClient
from tests.wire.test_leader_epochs import produce
from tests.wire.test_share_groups import alter_offsets_body, hb_body, started, until_assigned


async def cli(capsys, *args):
    code = await asyncio.to_thread(main, list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def rows(out):
    return [line.split() for line in out.splitlines() if line.strip()]


async def test_share_view(tmp_path, capsys):
    b = await started(tmp_path)
    try:
        bs = f"127.0.0.1:{b.port}"
        b.create_topic("orders", 2, {})
        c = await WireClient.connect(b.port)
        await produce(c, "orders", 0, 10)
        r = await c.call(76, 1, hb_body("m1", 0, names=("orders",)))
        await until_assigned(c, "m1", r.member_epoch, 2)
        await c.call(76, 1, hb_body("idle-member", 0, names=("orders",), group="idle"))
        await c.call(76, 1, hb_body("idle-member", -1, group="idle"))
        await c.call(91, 0, alter_offsets_body("idle", (("orders", ((0, 4),)),)))

        code, out, _ = await cli(capsys, "--bootstrap-server", bs, "--share", "--list")
        assert code == 0 and out.split() == ["g", "idle"]
        code, out, _ = await cli(capsys, "--bootstrap-server", bs, "--share", "--list", "--state")
        assert rows(out) == [["GROUP", "STATE"], ["g", "Stable"], ["idle", "Empty"]]
        code, out, _ = await cli(capsys, "--bootstrap-server", bs, "--share", "--list", "--state", "empty")
        assert rows(out) == [["GROUP", "STATE"], ["idle", "Empty"]]

        code, out, err = await cli(capsys, "--bootstrap-server", bs, "--share", "--describe", "--group", "idle")
        assert code == 0 and "Share group 'idle' has no active members." in err
        assert rows(out) == [
            ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"],
            ["idle", "orders", "0", "4", "6"],  # 10 records, start offset 4, nothing delivered yet
            ["idle", "orders", "1", "-", "-"],  # initialized at -1 when the member joined
        ]
        code, out, _ = await cli(
            capsys, "--bootstrap-server", bs, "--share", "--describe", "--group", "idle", "--verbose"
        )
        assert rows(out)[0] == ["GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET", "LAG"]
        code, out, _ = await cli(capsys, "--bootstrap-server", bs, "--share", "--describe", "--group", "g")
        # initialized at -1 (share.auto.offset.reset applies at the first fetch): no start offset, no lag yet
        assert rows(out)[1:] == [["g", "orders", "0", "-", "-"], ["g", "orders", "1", "-", "-"]]

        code, out, _ = await cli(capsys, "--bootstrap-server", bs, "--share", "--describe", "--group", "g", "--members")
        (header, row) = rows(out)
        assert header == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
        assert row[0:2] == ["g", "m1"] and row[-2:] == ["2", "orders:0,1"]
        code, out, _ = await cli(
            capsys, "--bootstrap-server", bs, "--share", "--describe", "--group", "g", "--members", "--verbose"
        )
        assert rows(out)[0][-2:] == ["MEMBER-EPOCH", "ASSIGNMENT"]
        code, out, _ = await cli(capsys, "--bootstrap-server", bs, "--share", "--describe", "--group", "g", "--state")
        (header, row) = rows(out)
        assert header == ["GROUP", "COORDINATOR", "(ID)", "STATE", "#MEMBERS"]
        assert row[0] == "g" and row[-2:] == ["Stable", "1"]
        code, out, _ = await cli(
            capsys, "--bootstrap-server", bs, "--share", "--describe", "--group", "g", "--state", "--verbose"
        )
        assert rows(out)[0][-3:] == ["GROUP-EPOCH", "ASSIGNMENT-EPOCH", "#MEMBERS"]

        code, out, _ = await cli(capsys, "--bootstrap-server", bs, "--share", "--describe", "--group", "nope")
        assert code == 1 and "Error: Share group 'nope' does not exist." in out
        await c.close()
    finally:
        await b.stop()
