from django.apps import AppConfig


class SpacesConfig(AppConfig):
    name = "spaces"

    def ready(self) -> None:
        # Every account gets its personal space the moment it is created (spaces.signals).
        from spaces import signals  # noqa: F401
