"""The actors of the daemon, one module each, and their supervisor."""
