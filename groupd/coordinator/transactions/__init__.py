"""The transaction coordinator: its pure rules (rules.py: every transition of a transactional id, and
the ``__transaction_state`` record formats) and the service that persists each transition before acting
on it (service.py), next to the group coordinator it writes markers through."""
