"""The share coordinator: the durable state of share groups' partitions in ``__share_group_state``."""
