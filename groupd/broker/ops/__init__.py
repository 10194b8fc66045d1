"""Operations: metrics (and their HTTP endpoint), log output, quotas."""
