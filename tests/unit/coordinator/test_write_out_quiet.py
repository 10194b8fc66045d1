"""The once-a-second write-out of the offsets partitions' files takes only the quiet ones: a busy
partition is written by its flush rounds and at checkpoints, and writing all of them in one loop turn
stalled every commit in flight."""

from types import SimpleNamespace

from coordinator.service import write_out_quiet


class FakeLog:
    def __init__(self) -> None:
        self.unwritten_batches = 0
        self.written = 0

    def write_pending(self) -> None:
        self.written += self.unwritten_batches
        self.unwritten_batches = 0


def test_a_partition_is_written_out_once_it_took_no_batch_for_a_tick():
    busy, quiet = SimpleNamespace(partition=0, log=FakeLog()), SimpleNamespace(partition=1, log=FakeLog())
    seen: dict[int, int] = {}
    busy.log.unwritten_batches, quiet.log.unwritten_batches = 5, 3
    write_out_quiet([busy, quiet], seen)  # both took batches since the last tick (there was none)
    assert (busy.log.written, quiet.log.written) == (0, 0)
    busy.log.unwritten_batches += 7
    write_out_quiet([busy, quiet], seen)
    assert (busy.log.written, quiet.log.written) == (0, 3)  # the quiet one is current in its file
    assert seen == {0: 12, 1: 0}
    write_out_quiet([busy, quiet], seen)  # the busy one went quiet
    assert (busy.log.written, quiet.log.written) == (12, 3)
    write_out_quiet([busy, quiet], seen)  # nothing waits: nothing written
    assert (busy.log.written, quiet.log.written) == (12, 3)
