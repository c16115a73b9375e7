"""The evolution page."""

from __future__ import annotations

from flask import Blueprint

pages = Blueprint("evolution", __name__)
