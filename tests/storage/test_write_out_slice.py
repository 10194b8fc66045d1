"""The offsets partitions' files are written out within a second, a tenth of the partitions at a
time: all of them in one loop turn stalled every commit in flight for 4-8 ms under load."""

from groupd.storage.local_sets import _WRITE_OUT_SLICES, write_out_slice


class FakeLog:
    def __init__(self, waiting: int) -> None:
        self.unwritten_batches = waiting
        self.written = 0

    def write_pending(self) -> None:
        self.written += self.unwritten_batches
        self.unwritten_batches = 0


def test_each_tick_writes_one_slice_and_a_second_of_ticks_writes_them_all():
    assert _WRITE_OUT_SLICES == 10
    logs = {p: FakeLog(5) for p in range(50)}
    write_out_slice(logs, 3, "t")
    assert [p for p, lg in logs.items() if lg.written] == [3, 13, 23, 33, 43]
    for tick in range(4, 4 + _WRITE_OUT_SLICES):  # a second later every partition's file is current
        write_out_slice(logs, tick, "t")
    assert all(lg.unwritten_batches == 0 and lg.written == 5 for lg in logs.values())
    write_out_slice(logs, 3, "t")  # nothing waits: nothing written
    assert sum(lg.written for lg in logs.values()) == 250
