"""The Telegram channel as a component: its settings (``[channels.telegram]``),
its token, its environment check and ``enact channel check telegram``.

Every CLI command imports this module to learn the components' commands, so
the channel (``enact.channels.telegram``: its Bot API client, its poller, the
inbox's protocol) is imported only by the methods that make or check it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from enact.components import ChannelComponent, ComponentError
from enact.config import Check, Config, Setting, between, one_of
from enact.frozen_dataclass import dataclass

if TYPE_CHECKING:
    from enact.channels.telegram import TelegramChannel
    from enact.channels.telegram_api import BotApi

NAME = "telegram"

ATTACHMENTS_DIR = "attachments"

_TOKEN = "channels.telegram.token"


def _is_http_url(value: str) -> bool:
    return value.startswith(("http://", "https://")) and len(value) > len("https://")


@dataclass(frozen=True, slots=True, kw_only=True)
class TelegramSettings:
    enabled: bool
    token: str
    token_file: str
    api_base: str
    poll_timeout_s: int
    max_photo_bytes: int
    parse_mode: str

    @classmethod
    def from_config(cls, config: Config) -> TelegramSettings:
        values = config.values
        return cls(enabled=values["channels.telegram.enabled"], token=values[_TOKEN],
                   token_file=values["channels.telegram.token_file"], api_base=values["channels.telegram.api_base"],
                   poll_timeout_s=values["channels.telegram.poll_timeout_s"],
                   max_photo_bytes=values["channels.telegram.max_photo_bytes"],
                   parse_mode=values["channels.telegram.parse_mode"])


class TelegramChannelComponent(ChannelComponent):
    name = NAME
    sections = ("channels",)
    settings = (
        Setting("channels.telegram.enabled", bool, False, "Run the Telegram channel"),
        Setting(_TOKEN, str, "",
                "The bot token; from the environment only, shown as set, unset or read from token_file",
                env="ENACT_TELEGRAM_TOKEN", secret=True, read_from="channels.telegram.token_file"),
        Setting("channels.telegram.token_file", str, "",
                "A file holding the bot token (mode 0600), read when ENACT_TELEGRAM_TOKEN is unset"),
        Setting("channels.telegram.api_base", str, "https://api.telegram.org",
                "The Bot API's base URL (a local Bot API server, or a test server)",
                Check("an http:// or https:// URL", _is_http_url)),
        Setting("channels.telegram.poll_timeout_s", int, 25, "Long-polling timeout of one getUpdates",
                between(0, 50)),
        Setting("channels.telegram.max_photo_bytes", int, 10 << 20,
                "Largest photo fetched into the home for the runtime", between(0, 1 << 30)),
        Setting("channels.telegram.parse_mode", str, "plain",
                "Replies valid for this parse mode are sent with it; others as plain text",
                one_of("plain", "HTML")),
    )

    def enabled(self, settings: Config) -> bool:
        return settings.typed(TelegramSettings).enabled

    def _api(self, settings: Config) -> BotApi:
        from enact.channels.telegram_api import BotApi, TokenError, read_token

        own = settings.typed(TelegramSettings)
        try:
            token = read_token(own.token, own.token_file)
        except TokenError as error:
            raise ComponentError(f"telegram: {error}") from None
        return BotApi(own.api_base, token)

    def validate_environment(self, settings: Config) -> None:
        """An enabled channel needs a token it may read."""
        if self.enabled(settings):
            self._api(settings)

    def make_channel(self, settings: Config) -> TelegramChannel:
        from enact.channels.telegram import TelegramChannel

        own = settings.typed(TelegramSettings)
        return TelegramChannel(
            self._api(settings),
            attachments=settings.home / ATTACHMENTS_DIR / NAME,
            poll_timeout_s=own.poll_timeout_s,
            max_photo_bytes=own.max_photo_bytes,
            parse_mode=own.parse_mode,
        )

    def check(self, settings: Config) -> str:
        """``getMe``: whether Telegram takes the token, and which bot it is."""
        from enact.channels.telegram_api import UNAUTHORIZED, BotApiError

        api = self._api(settings)
        try:
            me = api.call("getMe", {}, timeout_s=15.0)
        except BotApiError as error:
            if error.reason == UNAUTHORIZED:
                raise ComponentError(f"telegram: the bot token was refused by Telegram ({error}); "
                                     "check it with @BotFather") from None
            raise ComponentError(f"telegram: cannot reach the Bot API at {settings.typed(TelegramSettings).api_base}"
                                 f": {error}") from None
        if not isinstance(me, dict):
            raise ComponentError("telegram: getMe answered something that is not a bot")
        username = me.get("username", "")
        return f"the token works: bot @{username} (id {me.get('id')})"
