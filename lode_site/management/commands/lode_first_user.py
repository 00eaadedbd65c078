"""Create the first local account if there is none, and print how to log in.

The generated password is printed once, to this command's output (the terminal that runs
`python3 -m lode_site.bootstrap run`), and is never written anywhere: a file in the data
folder would be readable by anything that can read that folder. Every later start says how
to log in and how to set a new password with `manage.py changepassword` if it is lost.

Installs from before kept the password in `<data folder>/first-login.txt`; the next start
removes that file, showing its login one last time only if that account has never logged in.
"""

from __future__ import annotations

import re
import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

# Where installs from before kept the first account's password.
LEGACY_LOGIN_FILE = "first-login.txt"
USERNAME_LINE = re.compile(r"^username: (.+)$", re.MULTILINE)


class Command(BaseCommand):
    help = "Create a first local (admin) account when no account exists and print how to log in."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--username", default="lode")
        parser.add_argument("--url", default="http://127.0.0.1:8000/")

    def handle(self, *args, username: str, url: str, **options) -> None:
        users = get_user_model()
        if users.objects.filter(is_active=True).exists():
            self._remove_legacy_login_file(Path(settings.DATA_DIR) / LEGACY_LOGIN_FILE)
            admin = users.objects.filter(is_active=True, is_superuser=True).order_by("pk").first()
            name = admin.get_username() if admin is not None else "<username>"
            self.stdout.write(
                f"Log in at {url} with your lode account. Lost the password? Set a new one "
                f"with `python manage.py changepassword {name}`."
            )
            return
        password = secrets.token_urlsafe(12)
        users.objects.create_superuser(username=username, email="", password=password)
        self.stdout.write(
            self.style.SUCCESS(f"Created the first account. Log in at {url} as:\n")
            + f"    username: {username}\n    password: {password}\n"
            "This password is shown only now and is not stored anywhere: note it, or set a "
            f"new one later with `python manage.py changepassword {username}`."
        )

    def _remove_legacy_login_file(self, path: Path) -> None:
        """Delete the password file an earlier install left, showing its login once more
        only while that account has never logged in (else the password may be in use)."""
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return
        except OSError:
            text = ""
        path.unlink(missing_ok=True)
        match = USERNAME_LINE.search(text)
        users = get_user_model()
        account = (
            users.objects.filter(**{users.USERNAME_FIELD: match.group(1).strip()}).first()
            if match
            else None
        )
        if account is not None and account.last_login is None:
            self.stdout.write(
                f"Removed {path}; the first account's login, shown this last time:\n{text}"
            )
        else:
            self.stdout.write(f"Removed {path}, which held the first account's password.")
