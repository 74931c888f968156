"""A local stand-in for Slack: Web API, response URLs, signed delivery and a web page."""

from bot.sandbox.slack.errors import SlackError
from bot.sandbox.slack.server import create_app, install
from bot.sandbox.slack.workspace import DEMO_CHANNELS, DEMO_USERS, Workspace

__all__ = ["DEMO_CHANNELS", "DEMO_USERS", "SlackError", "Workspace", "create_app", "install"]
