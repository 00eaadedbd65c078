from django.apps import AppConfig


class LodeSiteConfig(AppConfig):
    name = "lode_site"
    verbose_name = "lode"

    def ready(self) -> None:
        from lode_site import checks  # noqa: F401  (registers the system checks)
