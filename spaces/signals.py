"""Every user has a personal space from the moment the account exists."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models.signals import post_save
from django.dispatch import receiver

from spaces.models import personal_space


@receiver(post_save, sender=settings.AUTH_USER_MODEL, dispatch_uid="spaces.personal_space")
def create_personal_space(
    sender: Any, instance: Any, created: bool, raw: bool = False, **kwargs: Any
) -> None:
    if created and not raw:
        personal_space(instance)
