"""Create the first local account if there is none, and print how to log in."""

from __future__ import annotations

import os
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create a first local (admin) account when no account exists and print how to log in."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--username", default="lode")
        parser.add_argument("--url", default="http://127.0.0.1:8000/")

    def handle(self, *args, username: str, url: str, **options) -> None:
        users = get_user_model()
        login_file = settings.DATA_DIR / "first-login.txt"
        if users.objects.filter(is_active=True).exists():
            hint = f" (first account's password: {login_file})" if login_file.exists() else ""
            self.stdout.write(f"Log in at {url} with your lode account{hint}.")
            return
        password = secrets.token_urlsafe(12)
        users.objects.create_superuser(username=username, email="", password=password)
        fd = os.open(login_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(f"username: {username}\npassword: {password}\n")
        self.stdout.write(
            self.style.SUCCESS(f"Created the first account. Log in at {url} as:\n")
            + f"    username: {username}\n    password: {password}\n"
            f"(also saved in {login_file}; change it with `manage.py changepassword {username}`)"
        )
