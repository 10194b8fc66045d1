"""A full disk (issue 26 item 5): commits halt the broker as Kafka does, and never answer a retriable error
that cannot heal; a produce is refused (issue 40) and heals by itself once there is room; start-up on a
full disk is one line and exit status 1; once the disk takes writes again every acknowledged commit is
back.

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
from tests.wire.test_data_plane import fetch_body as data_fetch_body
from tests.wire.test_data_plane import part, produce_body
from tests.wire.test_groups import commit_body, fetch_body

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="prlimit of another process is Linux-only")

HALT = "the log directory is offline; groupd halts with exit status 1"


class PipedBroker(BrokerProcess):
    """``python -m groupd`` with its output in a pipe (a full disk must not stop the test from reading it), and
    optionally started with a file size limit (a disk full from the start)."""

    def __init__(self, log_dir, port=None, file_limit=None):
        super().__init__(log_dir, port=port)
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


def assert_halted_cleanly(broker: PipedBroker) -> None:
    assert broker.wait() == 1, broker.output[-3000:]
    halts = [line for line in broker.lines if HALT in line]
    assert len(halts) == 1 and " CRITICAL " in halts[0], broker.output[-3000:]
    assert "Traceback" not in broker.output, broker.output[-3000:]


async def _commit_until_refused(port: int, group: str, start: int, count: int) -> tuple[int, int]:
    """Commit start, start+1, ...; returns (last acknowledged, last sent) once the broker stops
    answering, which it must do without an error answer first (the halt comes before any). Never more
    than ``count`` commits: a broker that answers errors for ever fails the test."""
    client = await WireClient.connect(port)
    acked = start - 1
    sent = start - 1
    errors: list[int] = []
    try:
        for offset in range(start, start + count):
            sent = offset
            resp = await client.call(8, 8, commit_body(group, "t", 0, offset, f"m{offset}"), timeout=10)
            code = resp.topics[0].partitions[0].error_code
            if code == 0:
                acked = offset
            else:
                errors.append(code)
    except (OSError, asyncio.IncompleteReadError, ConnectionError, TimeoutError):
        assert errors == [], errors
        return acked, sent
    finally:
        await client.close()
    raise AssertionError(f"the broker kept answering after the disk filled: errors {errors[:10]}...")


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


@pytest.mark.timeout(120)
@pytest.mark.parametrize("limit_at_start", [1, 4096], ids=["journal-replay-fails", "journal-prefill-fails"])
async def test_commits_on_a_full_disk_halt_the_broker_and_a_restart_recovers_every_acknowledged_one(
    tmp_path, limit_at_start
):
    data = tmp_path / "data"
    broker = PipedBroker(data).start()
    try:
        await _create_topic(broker.port, "t")
        await _commit(broker.port, "g", range(30))
        broker.fill_disk()
        acked, sent = await _commit_until_refused(broker.port, "g", 30, 2000)
        assert_halted_cleanly(broker)

        # start-up while the disk is still full (the journal's batches are replayed into their partitions,
        # then the journal is made again): one line, exit status 1, no traceback
        full = PipedBroker(data, broker.port, file_limit=limit_at_start)
        full.launch()
        assert full.wait() == 1, full.output[-3000:]
        assert "Traceback" not in full.output, full.output[-3000:]
        refusals = [line for line in full.lines if "cannot start" in line or HALT in line]
        assert len(refusals) == 1, full.output[-3000:]

        # space again: everything acknowledged is there, and commits are taken
        again = PipedBroker(data, broker.port).start()
        try:
            assert acked <= await _committed(again.port, "g") <= sent
            await _commit(again.port, "g", range(10_000, 10_001))
        finally:
            again.kill()
    finally:
        broker.kill()


@pytest.mark.timeout(60)
async def test_a_produce_on_a_full_disk_is_refused_while_reads_go_on(tmp_path):
    """An append the disk has no room for leaves nothing behind, so unlike a failed fsync it need not take
    the directory offline: Produce answers KAFKA_STORAGE_ERROR (retriable), Fetch and Metadata are served,
    one ERROR line says why, and once there is room the next produce is stored, nothing acknowledged lost.
    (No group here: the offsets store writes its partitions' files behind its journal, and that deferred
    write on a full disk still halts the broker, as commits do.)"""
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
