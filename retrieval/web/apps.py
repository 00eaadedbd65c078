"""The retrieval app's configuration: registers its start-up checks."""

from __future__ import annotations

from django.apps import AppConfig


class RetrievalConfig(AppConfig):
    name = "retrieval"

    def ready(self) -> None:
        from retrieval.web import backend_checks  # noqa: F401  (registers the system checks)
