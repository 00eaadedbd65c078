"""Create or revoke API tokens (the raw token is printed once and never stored)."""

from __future__ import annotations

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from lode_site.models import ApiToken, token_digest


class Command(BaseCommand):
    help = "Create an API token for a user (`create USER NAME`) or revoke one (`revoke USER NAME`)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("action", choices=["create", "revoke", "list"])
        parser.add_argument("username")
        parser.add_argument("name", nargs="?", default="default")

    def handle(self, *args, action: str, username: str, name: str, **options) -> None:
        try:
            user = get_user_model().objects.get(username=username)
        except get_user_model().DoesNotExist:
            raise CommandError(f"No user named {username!r}.") from None
        if action == "list":
            for token in ApiToken.objects.filter(user=user).order_by("created_at"):
                self.stdout.write(
                    f"{token.name}\tcreated {token.created_at:%Y-%m-%d}\t"
                    f"last used {token.last_used_at or 'never'}"
                )
            return
        if action == "revoke":
            deleted, _ = ApiToken.objects.filter(user=user, name=name).delete()
            if not deleted:
                raise CommandError(f"{username} has no token named {name!r}.")
            self.stdout.write(f"Revoked {username}'s token {name!r}.")
            return
        raw = "lode_" + secrets.token_urlsafe(32)
        ApiToken.objects.create(user=user, name=name, digest=token_digest(raw))
        self.stdout.write(
            f"{raw}\n(send as `Authorization: Bearer <token>`; it is not shown again)"
        )
