"""The overview page."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, render_template

from enact.console.app import ask
from enact.messages.control import Status

pages = Blueprint("overview", __name__)


@pages.get("/")
def overview() -> Any:
    return render_template("overview.html", active="/", status=ask(Status()))
