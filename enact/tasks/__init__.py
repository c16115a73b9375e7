"""Task work: the queue's records and rules, worktrees, the doctor, confinement."""
