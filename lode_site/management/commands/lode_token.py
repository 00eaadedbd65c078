"""Create, list, expire or revoke access tokens (the raw token is printed once, never stored).

    manage.py lode_token create alice laptop [--scope read] [--space 3 --space 5] [--days 30]
    manage.py lode_token list alice
    manage.py lode_token expire alice laptop
    manage.py lode_token revoke alice laptop
"""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from lode_site.models import ApiToken, token_create, token_expire, token_revoke


class Command(BaseCommand):
    help = (
        "Access tokens for the API and the MCP server: `create USER NAME` (with --scope, "
        "--space, --days), `list USER`, `expire USER NAME`, `revoke USER NAME`."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("action", choices=["create", "list", "expire", "revoke"])
        parser.add_argument("username")
        parser.add_argument("name", nargs="?", default="default")
        parser.add_argument(
            "--scope",
            choices=ApiToken.Scope.values,
            default=ApiToken.Scope.READ_ASK,
            help="read: search, open, graph queries, list spaces; read_ask: also ask (default).",
        )
        parser.add_argument(
            "--space",
            type=int,
            action="append",
            default=[],
            help="A space id the token covers (repeat for several); default: all the user's.",
        )
        parser.add_argument("--days", type=int, help="Expire the token after this many days.")

    def handle(self, *args, action: str, username: str, name: str, **options) -> None:
        try:
            user = get_user_model().objects.get(username=username)
        except get_user_model().DoesNotExist:
            raise CommandError(f"No user named {username!r}.") from None
        if action == "list":
            for token in ApiToken.objects.filter(user=user).order_by("created_at"):
                spaces = ",".join(str(pk) for pk in token.spaces.values_list("pk", flat=True))
                self.stdout.write(
                    f"{token.name}\t{token.status}\t{token.scope}\t"
                    f"spaces {spaces or 'all'}\tcreated {token.created_at:%Y-%m-%d}\t"
                    f"expires {token.expires_at or 'never'}\t"
                    f"last used {token.last_used_at or 'never'}"
                )
            return
        if action in ("expire", "revoke"):
            tokens = list(ApiToken.objects.filter(user=user, name=name))
            if not tokens:
                raise CommandError(f"{username} has no token named {name!r}.")
            for token in tokens:
                if action == "revoke":
                    token_revoke(token)
                else:
                    token_expire(token)
            verb = "Revoked" if action == "revoke" else "Expired"
            self.stdout.write(f"{verb} {username}'s token {name!r}.")
            return
        days = options["days"]
        if days is not None and days < 1:
            raise CommandError("--days must be at least 1.")
        try:
            _, raw = token_create(
                user=user,
                name=name,
                scope=options["scope"],
                space_ids=options["space"],
                expires_at=timezone.now() + timedelta(days=days) if days else None,
            )
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from None
        self.stdout.write(
            f"{raw}\n(send as `Authorization: Bearer <token>`; it is not shown again)"
        )
