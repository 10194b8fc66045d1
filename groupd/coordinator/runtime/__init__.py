"""The coordinator runtime (shards, tokens, ordered delivery after durability, timers), its ports on the
event loop, and the loader that replays the partitions at start-up."""
