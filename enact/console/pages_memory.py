"""The memory page."""

from __future__ import annotations

from flask import Blueprint

pages = Blueprint("memory", __name__)
