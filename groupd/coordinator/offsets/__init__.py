"""Offsets rules: commit, fetch, delete, expiry, and transactional offsets."""
