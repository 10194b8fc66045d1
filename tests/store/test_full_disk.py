"""A full disk (issues 26 item 5 and 40): the writes are refused, each with Kafka's error code for its API,
and everything else goes on; writes resume by themselves once there is room, nothing acknowledged is
lost; start-up on a full disk is one line and exit status 1.

The full disk is the kernel's own refusal, without root: RLIMIT_FSIZE. Python ignores SIGXFSZ, so a
write past the limit fails with EFBIG (or comes up short) exactly where a full disk fails with ENOSPC;
``prlimit`` lowers the limit of a running broker, and raising it again is the space coming back.
Output goes through a pipe, which the limit does not cover.
"""

from __future__ import annotations

import asyncio
import io
import resource
import subprocess
import sys
import threading
import time

import pytest

from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode
from groupd.storage.batch import build_batch
from tests.harness import ROOT, BrokerProcess, WireClient
from tests.wire.test_consumer_migration import heartbeat_body
from tests.wire.test_data_plane import fetch_body as data_fetch_body
from tests.wire.test_data_plane import part, produce_body
from tests.wire.test_groups import commit_body, fetch_body, join_body, join_with_id, sync_body
from tests.wire.test_transactions import init_body

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="prlimit of another process is Linux-only")

HALT = "the log directory is offline; groupd halts with exit status 1"


class PipedBroker(BrokerProcess):
    """``python -m groupd`` with its output in a pipe (a full disk must not stop the test from reading it), and
    optionally started with a file size limit (a disk full from the start)."""

    def __init__(self, log_dir, port=None, file_limit=None, overrides=None):
        super().__init__(log_dir, overrides, port=port)
        self.file_limit = file_limit
        self.lines: list[str] = []

    def launch(self) -> None:
        limit = self.file_limit

        def limited() -> None:
            if limit is not None:
                resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

        self._log = io.BytesIO()  # closed by kill(), like the file it stands for
        self.proc = subprocess.Popen(
            self.command(), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=limited
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            self.lines.append(line)

    def log_text(self) -> str:
        return "".join(self.lines)

    def fill_disk(self) -> None:
        """Every file write past its first byte fails from now on."""
        _soft, hard = resource.prlimit(self.proc.pid, resource.RLIMIT_FSIZE)
        resource.prlimit(self.proc.pid, resource.RLIMIT_FSIZE, (1, hard))

    def make_room(self) -> None:
        """The space comes back."""
        _soft, hard = resource.prlimit(self.proc.pid, resource.RLIMIT_FSIZE)
        resource.prlimit(self.proc.pid, resource.RLIMIT_FSIZE, (hard, hard))

    def wait(self, timeout: float = 20.0) -> int:
        code = self.proc.wait(timeout)
        time.sleep(0.1)  # the reader thread takes the last lines
        return code

    @property
    def output(self) -> str:
        return self.log_text()


async def _committed(port: int, group: str) -> int:
    client = await WireClient.connect(port)
    try:
        for _ in range(200):
            resp = await client.call(9, 7, fetch_body(group, "t", [0]))
            if resp.error_code == 0 and resp.topics[0].partitions[0].error_code == 0:
                return resp.topics[0].partitions[0].committed_offset
            await asyncio.sleep(0.05)
    finally:
        await client.close()
    raise AssertionError("offsets never loaded")


async def _create_topic(port: int, name: str) -> None:
    client = await WireClient.connect(port)
    cls = codec.request_class(3, 9)
    topic = codec.nested(cls, "MetadataRequestTopic")
    body = codec.make(
        cls,
        topics=(topic(name=name),),
        allow_auto_topic_creation=True,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    try:
        for _ in range(50):
            resp = await client.call(3, 9, body)
            if resp.topics[0].error_code == 0:
                return
            await asyncio.sleep(0.05)
    finally:
        await client.close()
    raise AssertionError("topic not created")


async def _commit(port: int, group: str, offsets: range) -> None:
    client = await WireClient.connect(port)
    try:
        for offset in offsets:
            resp = await client.call(8, 8, commit_body(group, "t", 0, offset, f"m{offset}"))
            assert resp.topics[0].partitions[0].error_code == 0
    finally:
        await client.close()


def _commit_error(resp) -> int:
    return resp.topics[0].partitions[0].error_code


@pytest.mark.timeout(120)
async def test_a_full_disk_refuses_group_and_transaction_writes_while_reads_and_heartbeats_go_on(tmp_path):
    """Kafka answers a coordinator's failed append (KAFKA_STORAGE_ERROR) as NOT_COORDINATOR: the group
    coordinator's normalizeException for OffsetCommit and SyncGroup, TransactionStateManager's
    appendTransactionToLog for the transaction APIs. The client looks its coordinator up again and
    retries; meanwhile a stable member's heartbeats, OffsetFetch, Fetch and Metadata need no write and are
    served. Once there is room the next writes are taken, and a restart finds every acknowledged one."""
    data = tmp_path / "data"
    broker = PipedBroker(data, overrides={"group.initial.rebalance.delay.ms": "0"}).start()
    try:
        await _create_topic(broker.port, "t")
        await _commit(broker.port, "g", range(30))
        c = await WireClient.connect(broker.port)
        member = await join_with_id(c, group="m")
        joined = await c.call(11, 5, join_body(5, member, group="m"))
        assert joined.error_code == 0
        synced = await c.call(14, 5, sync_body(5, member, joined.generation_id, [(member, b"a")], group="m"))
        assert synced.error_code == 0
        init = await c.call(22, 4, init_body("tx"))
        assert init.error_code == 0
        batch = build_batch([(b"k", b"v" * 100)], timestamp_ms=1000)
        assert part(await c.call(0, 9, produce_body("t", 0, batch))).error_code == 0

        broker.fill_disk()
        for offset in range(30, 60):
            refused = await c.call(8, 8, commit_body("g", "t", 0, offset, f"m{offset}"), timeout=10)
            assert _commit_error(refused) == ErrorCode.not_coordinator
            beat = await c.call(12, 4, heartbeat_body(member, joined.generation_id, group="m"))
            assert beat.error_code == 0
        other = await WireClient.connect(broker.port)  # a new group's SyncGroup writes its metadata: refused
        newcomer = await join_with_id(other, group="n")
        j = await other.call(11, 5, join_body(5, newcomer, group="n"))
        assert j.error_code == 0
        s = await other.call(14, 5, sync_body(5, newcomer, j.generation_id, [(newcomer, b"a")], group="n"))
        assert s.error_code == ErrorCode.not_coordinator
        await other.close()
        again = await c.call(22, 4, init_body("tx", pid=init.producer_id, epoch=init.producer_epoch))
        assert again.error_code == ErrorCode.not_coordinator
        assert part(await c.call(0, 9, produce_body("t", 0, batch))).error_code == ErrorCode.kafka_storage_error
        assert await _committed(broker.port, "g") == 29
        fetched = await c.call(1, 11, data_fetch_body("t", 0, 0))
        assert fetched.responses[0].partitions[0].high_watermark == 1
        await _create_topic(broker.port, "t")  # Metadata: served

        broker.make_room()
        ok = await c.call(8, 8, commit_body("g", "t", 0, 60, "m60"))
        assert _commit_error(ok) == 0
        beat = await c.call(12, 4, heartbeat_body(member, joined.generation_id, group="m"))
        assert beat.error_code == 0
        fenced = await c.call(22, 4, init_body("tx", pid=init.producer_id, epoch=init.producer_epoch))
        assert fenced.error_code == 0 and fenced.producer_epoch == init.producer_epoch + 1
        await c.close()
        assert broker.stop() == 0
        assert "Traceback" not in broker.output and HALT not in broker.output, broker.output[-3000:]
        # one line per 10 s where the disk refused a write, not one per request
        assert len([line for line in broker.lines if "refused, no room" in line]) <= 3, broker.output[-3000:]

        broker.start()
        assert await _committed(broker.port, "g") == 60
    finally:
        broker.kill()


@pytest.mark.timeout(120)
async def test_a_start_that_cannot_restore_its_journal_is_one_line_and_one_that_can_serves_on_a_full_disk(tmp_path):
    """A broker killed with commits in its journal only must write them into their partitions at the next
    start. On a disk with no room for them it cannot, and says so in one line with exit status 1 (Kafka,
    too, halts when its only log directory fails while loading). With room for them but not for the
    journal's own 9 MiB files it starts, serves every acknowledged commit, takes new ones while its
    journal has room and refuses them after; a start with room finds every acknowledged commit."""
    data = tmp_path / "data"
    broker = PipedBroker(data).start()
    try:
        await _create_topic(broker.port, "t")
        await _commit(broker.port, "g", range(30))
        broker.kill()

        full = PipedBroker(data, broker.port, file_limit=1)
        full.launch()
        assert full.wait() == 1, full.output[-3000:]
        assert "Traceback" not in full.output, full.output[-3000:]
        refusals = [line for line in full.lines if "cannot start" in line]
        assert len(refusals) == 1, full.output[-3000:]

        nearly = PipedBroker(data, broker.port, file_limit=4096).start()  # the partitions' files fit
        try:
            assert await _committed(nearly.port, "g") == 29
            # the journal files got what room there was: commits are taken until it is used up, then
            # refused; killed there, every acknowledged one must come back
            c = await WireClient.connect(nearly.port)
            codes = [_commit_error(await c.call(8, 8, commit_body("g", "t", 0, o, f"m{o}"))) for o in range(30, 130)]
            await c.close()
            assert set(codes) == {ErrorCode.none, ErrorCode.not_coordinator}, codes
            acked = 29 + codes.index(ErrorCode.not_coordinator)
            assert codes[: acked - 29] == [ErrorCode.none] * (acked - 29)
        finally:
            nearly.kill()

        again = PipedBroker(data, broker.port).start()
        try:
            assert await _committed(again.port, "g") == acked
            await _commit(again.port, "g", range(10_000, 10_001))
        finally:
            again.kill()
    finally:
        broker.kill()


@pytest.mark.timeout(120)
async def test_a_start_on_a_full_disk_after_a_clean_stop_serves_reads_and_takes_commits_once_there_is_room(
    tmp_path,
):
    """After a clean stop every partition holds what was acknowledged and the journal is empty: a start on
    a full disk has nothing to restore, only its journal files to fill. It starts without them (one
    WARNING line saying commits are refused until there is room), serves OffsetFetch, Fetch and Metadata,
    refuses commits with NOT_COORDINATOR, and takes them once there is room, without a restart."""
    data = tmp_path / "data"
    broker = PipedBroker(data).start()
    try:
        await _create_topic(broker.port, "t")
        await _commit(broker.port, "g", range(30))
        c = await WireClient.connect(broker.port)
        batch = build_batch([(b"k", b"v" * 100)], timestamp_ms=1000)
        assert part(await c.call(0, 9, produce_body("t", 0, batch))).error_code == 0
        await c.close()
        assert broker.stop() == 0

        full = PipedBroker(data, broker.port, file_limit=1).start()
        try:
            assert await _committed(full.port, "g") == 29
            c = await WireClient.connect(full.port)
            fetched = await c.call(1, 11, data_fetch_body("t", 0, 0))
            assert fetched.responses[0].partitions[0].high_watermark == 1
            refused = await c.call(8, 8, commit_body("g", "t", 0, 30, "m30"))
            assert _commit_error(refused) == ErrorCode.not_coordinator
            full.make_room()
            assert _commit_error(await c.call(8, 8, commit_body("g", "t", 0, 31, "m31"))) == 0
            await c.close()
            assert full.stop() == 0
            assert "Traceback" not in full.output and HALT not in full.output, full.output[-3000:]
            assert len([line for line in full.lines if "no room to prepare" in line]) == 1, full.output[-3000:]
        finally:
            full.kill()
        again = PipedBroker(data, broker.port).start()
        try:
            assert await _committed(again.port, "g") == 31
        finally:
            again.kill()
    finally:
        broker.kill()


@pytest.mark.timeout(60)
async def test_a_produce_on_a_full_disk_is_refused_while_reads_go_on(tmp_path):
    """An append the disk has no room for leaves nothing behind, so unlike a failed fsync it need not take
    the directory offline: Produce answers KAFKA_STORAGE_ERROR (retriable), Fetch and Metadata are served,
    one ERROR line says why, and once there is room the next produce is stored, nothing acknowledged lost.
    """
    broker = PipedBroker(tmp_path / "data").start()
    try:
        await _create_topic(broker.port, "d")
        client = await WireClient.connect(broker.port)
        batch = build_batch([(b"k", b"v" * 100)], timestamp_ms=1000)
        resp = await client.call(0, 9, produce_body("d", 0, batch))
        assert part(resp).error_code == 0
        broker.fill_disk()
        for _ in range(20):
            refused = await client.call(0, 9, produce_body("d", 0, batch))
            assert part(refused).error_code == ErrorCode.kafka_storage_error
        fetched = await client.call(1, 11, data_fetch_body("d", 0, 0))
        assert fetched.responses[0].partitions[0].high_watermark == 1
        await _create_topic(broker.port, "d")  # Metadata: served
        broker.make_room()
        again = await client.call(0, 9, produce_body("d", 0, batch))
        assert part(again).error_code == 0 and part(again).base_offset == 1
        await client.close()
        assert broker.stop() == 0
        assert "Traceback" not in broker.output and HALT not in broker.output, broker.output[-3000:]
        assert len([line for line in broker.lines if "refused, no room" in line]) == 1, broker.output[-3000:]
        broker.start()
        client = await WireClient.connect(broker.port)
        fetched = await client.call(1, 11, data_fetch_body("d", 0, 0))
        assert fetched.responses[0].partitions[0].high_watermark == 2
        await client.close()
    finally:
        broker.kill()
