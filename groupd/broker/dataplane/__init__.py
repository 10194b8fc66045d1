"""The data plane: topics, partitions and their logs, producers, transactions index, leader epochs."""
