"""The classic group protocol (JoinGroup/SyncGroup/Heartbeat/LeaveGroup): its pure rules."""
