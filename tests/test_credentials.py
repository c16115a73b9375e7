"""Credentials by their real shapes: found by kind, never echoed; ordinary
words about passwords and tokens are not mistaken for them."""

from __future__ import annotations

import pytest
from credential_shapes import GOOGLE, NPM, SHAPES, TELEGRAM
from hypothesis import given
from hypothesis import strategies as st

from enact.credentials import REDACTED, find_credential, redact, redact_json

# Built from parts so that no scanner mistakes this file for a leak.
_GITHUB_CLASSIC = "ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2
_GITHUB_FINE = "github_pat_" + "11ABCDEFG0" * 4 + "_xyz"
_OPENAI = "sk-" + "proj-" + "Q9w8E7r6T5y4U3i2O1p0AsDf"
_ANTHROPIC = "sk-ant-" + "api03-" + "abcDEF123456ghiJKL7890"
_SLACK = "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
_AWS = "AKIA" + "IOSFODNN7EXAMPLE"
_JWT = ".".join(("eyJhbGciOiJIUzI1NiJ9", "eyJzdWIiOiIxMjM0NTY3ODkwIn0", "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"))
_PEM = "-----BEGIN " + "RSA PRIVATE KEY-----"
_OPENSSH = "-----BEGIN " + "OPENSSH PRIVATE KEY-----"


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (f"my token is {_GITHUB_CLASSIC}", "GitHub token"),
        (f"use {_GITHUB_FINE} for the bot", "GitHub token"),
        (f"the key {_OPENAI} works", "OpenAI-style API key"),
        (f"claude key {_ANTHROPIC}", "Anthropic API key"),
        (f"slack {_SLACK}", "Slack token"),
        (f"aws id {_AWS} in us-east-1", "AWS access key id"),
        (f"bearer {_JWT}", "JWT"),
        (f"{_PEM}\nMIIEow...", "private key"),
        (f"{_OPENSSH}", "private key"),
        ("the db password=hunter2 on staging", "password or token assignment"),
        ("PASSWORD = 'correct-horse'", "password or token assignment"),
        ("token: a8f3k2j9x", "password or token assignment"),
        ("api_key: abcdefghijklmnopqrstuvwx", "password or token assignment"),
        ("client_secret=s3cr3tvalue", "password or token assignment"),
    ],
)
def test_credential_of_a_real_shape_is_found_by_kind(text: str, kind: str) -> None:
    assert find_credential(text) == kind


@pytest.mark.parametrize(
    "text",
    [
        "tokens of appreciation",
        "my password manager is Bitwarden",
        "password manager: Bitwarden",
        "the token: expires soon, renew it",
        "I forgot my password again",
        "a secret: keep it between us",
        "sk-8 is a skating brand",  # too short to be a key
        "ask-me-anything sessions on Fridays",
        "ghp_short",
        "AKIA is a prefix, not a key",
        "eyJ alone is not a token",
        "-----BEGIN PUBLIC KEY-----",
        "tokenizer settings: use sentencepiece",
    ],
)
def test_ordinary_text_is_not_a_credential(text: str) -> None:
    assert find_credential(text) is None


def test_the_kind_never_contains_the_credential() -> None:
    kind = find_credential(f"x {_GITHUB_CLASSIC} y")
    assert kind is not None and _GITHUB_CLASSIC not in kind and "ghp_" not in kind


def test_redact_replaces_every_credential_and_keeps_the_rest() -> None:
    text = f"github {_GITHUB_CLASSIC} and aws {_AWS}; password=hunter2 done"
    redacted = redact(text)
    assert _GITHUB_CLASSIC not in redacted and _AWS not in redacted and "hunter2" not in redacted
    assert redacted.startswith("github ") and redacted.endswith(" done")
    assert redacted.count(REDACTED) == 3
    assert find_credential(redacted) is None


def test_redact_leaves_ordinary_text_alone() -> None:
    assert redact("tokens of appreciation") == "tokens of appreciation"


def test_redact_json_redacts_every_string_of_an_action_s_args() -> None:
    args = {"text": f"key {_GITHUB_CLASSIC}", "tags": ["ok", _AWS], "count": 3, "nested": {"v": f"t {_SLACK}"}}
    assert redact_json(args) == {"text": f"key {REDACTED}", "tags": ["ok", REDACTED], "count": 3,
                                 "nested": {"v": f"t {REDACTED}"}}


@pytest.mark.parametrize(("kind", "text"), SHAPES.items(), ids=list(SHAPES))
def test_each_common_shape_is_found_by_its_kind(kind: str, text: str) -> None:
    assert find_credential(text) == kind.strip()
    assert REDACTED in redact(text) and find_credential(redact(text)) is None


@pytest.mark.parametrize(
    "text",
    [
        f"https://api.telegram.org/bot{TELEGRAM}/getMe",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "the api key is 9f8e7d6c5b4a",
        "postgres://app:s3cret@localhost:5432/app",
    ],
)
def test_a_credential_in_a_url_or_said_in_words_is_found(text: str) -> None:
    assert find_credential(text) is not None


@pytest.mark.parametrize(
    "text",
    [
        GOOGLE[:-1],  # one short of the key's length
        NPM[:-1],
        "AIza is how the key begins",
        "sk_live_ alone names a prefix",
        "npm_modules are big",
        "glpat- is GitLab's prefix",
        "the meeting is at 10:30, room 123456789:4",
        "https://example.com:8443/path@section",
        "ssh://git@github.com/owner/repo.git",
        "mailto:owner@example.com",
        "the password is stored in the vault",
        "the token is 5 minutes old",
        "the secret is out",
        "my aws secret access key is in 1Password",
        "7000001:AAH-secret-test-token-do-not-leak",  # a test token, not the real length
    ],
)
def test_near_misses_of_the_common_shapes_are_not_credentials(text: str) -> None:
    assert find_credential(text) is None


_PROSE = st.lists(st.sampled_from(
    ["the", "owner", "prefers", "tokens", "of", "password", "manager", "is", "secret", "key", "reviews", "at",
     "morning", "api", "access", "bank", "Example", "live", "npm", "token:", "pass", "word", "in", "the", "vault"]),
    min_size=1, max_size=12).map(" ".join)


@given(_PROSE)
def test_ordinary_words_are_never_a_credential(text: str) -> None:
    assert find_credential(text) is None


@given(st.binary(min_size=20, max_size=20).map(bytes.hex), st.sampled_from(["commit", "fixed in", "see", "at"]))
def test_hex_commit_ids_are_not_credentials(sha: str, words: str) -> None:
    assert find_credential(f"{words} {sha}") is None
    assert find_credential(f"{words} {sha[:12]}: the fix") is None


@given(st.uuids(), st.sampled_from(["task", "request id", "session", "the token id"]))
def test_uuids_are_not_credentials(uuid: object, words: str) -> None:
    assert find_credential(f"{words} {uuid}") is None
