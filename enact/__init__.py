"""enact: a personal software agent that runs as a daemon on its owner's machine."""

__version__ = "0.1.0"

__all__ = ["__version__"]
