"""Self-update: enact installs a newer revision of itself as a release
beside the running one, checks it, hands the home over to it with
``--takeover`` and, when it does not hold, gives the home back to the old
release.

The update is driven from outside the daemons it replaces, by the process
that runs ``enact update`` (the chat's ``/update`` starts one): it records
every step in a journal under the home (``history``), so an attempt
outlives the daemon that was serving when it began.
"""
