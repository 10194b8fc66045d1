"""Share groups (KIP-932): the group type's rules on the coordinator runtime."""
