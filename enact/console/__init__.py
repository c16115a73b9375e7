"""The web console: the daemon's state and the owner's actions in a browser,
served by the daemon beside its actors (``component.py`` declares it)."""
