"""Serve lode's MCP tools over stdin/stdout for one access token (docs/agents.md).

    LODE_MCP_TOKEN=lode_… manage.py lode_mcp        or        manage.py lode_mcp --token lode_…

An agent (Claude Code, Cursor, VS Code) starts this command and speaks MCP over its pipes.
The token is checked before serving and again on every call, so revoking it ends access at
once. Nothing but protocol messages is written to stdout.
"""

from __future__ import annotations

import os

from django.core.management.base import BaseCommand, CommandError

from retrieval.web.mcp_server import serve_stdio
from retrieval.web.mcp_tools import Grant, Refused, token_for

TOKEN_ENV = "LODE_MCP_TOKEN"


class Command(BaseCommand):
    help = "Serve the MCP server over stdio for an access token (--token or LODE_MCP_TOKEN)."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--token",
            help=f"The access token (better: the {TOKEN_ENV} environment variable, which "
            "other users of this machine cannot read from the process list).",
        )

    def handle(self, *args, token: str | None, **options) -> None:
        try:
            row = token_for(token or os.environ.get(TOKEN_ENV, "").strip())
        except Refused as exc:
            raise CommandError(exc.message) from None
        serve_stdio(Grant(token_id=row.pk, transport="stdio"))
