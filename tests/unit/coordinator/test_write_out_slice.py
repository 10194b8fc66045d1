"""The offsets partitions' files are written out within a second, a tenth of the partitions at a
time: all of them in one loop turn stalled every commit in flight for 4-8 ms under load."""

from types import SimpleNamespace

from groupd.coordinator.runtime.loader import _WRITE_OUT_SLICES, write_out_slice


class FakeLog:
    def __init__(self, waiting: int) -> None:
        self.unwritten_batches = waiting
        self.written = 0

    def write_pending(self) -> None:
        self.written += self.unwritten_batches
        self.unwritten_batches = 0


def test_each_tick_writes_one_slice_and_a_second_of_ticks_writes_them_all():
    assert _WRITE_OUT_SLICES == 10
    shards = [SimpleNamespace(partition=p, log=FakeLog(5)) for p in range(50)]
    write_out_slice(shards, 3)
    assert [s.partition for s in shards if s.log.written] == [3, 13, 23, 33, 43]
    for tick in range(4, 4 + _WRITE_OUT_SLICES):  # a second later every partition's file is current
        write_out_slice(shards, tick)
    assert all(s.log.unwritten_batches == 0 and s.log.written == 5 for s in shards)
    write_out_slice(shards, 3)  # nothing waits: nothing written
    assert sum(s.log.written for s in shards) == 250
