"""Credentials of the common shapes that issue 18 found admitted, built from
parts so that no scanner mistakes a test file for a leak; shared by the
unit tests of the shapes and the daemon tests that refuse them."""

from __future__ import annotations

GOOGLE = "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"
STRIPE_SECRET = "sk_" + "live_" + "51H8x2eKq9ZtY7wVb3NcR4mLp0sD"
STRIPE_RESTRICTED = "rk_" + "live_" + "51H8x2eKq9ZtY7wVb3NcR4mLp0sD"
GITLAB = "glpat-" + "xY9zW8vU7tS6rQ5pO4nM"
NPM = "npm_" + "aB1cD2eF3gH4iJ5kL6mN7oP8qR9sT0uV1wX2"
URL_PASSWORD = "https://deploy:" + "Tr0ub4dor-3" + "@git.example.com/team/repo.git"
TELEGRAM = "123456789:" + "AAE" + "x7Yz_W6vU5-tS4rQ3pO2nM1lK0jI9hG8"
AWS_SECRET_IN_WORDS = "my aws secret access key is " + "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"

SHAPES = {
    "Google API key": f"the maps key is {GOOGLE} for the site",
    "Stripe key": f"billing uses {STRIPE_SECRET}",
    "Stripe key ": f"the restricted key {STRIPE_RESTRICTED} reads charges",
    "GitLab token": f"gitlab access {GITLAB}",
    "npm token": f"publish with {NPM}",
    "password in a URL": f"clone {URL_PASSWORD}",
    "Telegram bot token": f"the bot runs on {TELEGRAM}",
    "password or token assignment": AWS_SECRET_IN_WORDS,
}
"""Kind (a trailing space keeps two of one kind apart) to a text holding one."""
