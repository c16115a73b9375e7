"""The daemon's plumbing, kept apart from ``enact.daemon``, which alone knows
the start-up and shut-down order: the commands and what a session is told
first (``commands``), claiming the home (``claim``), the chat channels
(``channels``), what the daemon reports of itself (``reports``) and how it is
asked to stop (``stopping``)."""
