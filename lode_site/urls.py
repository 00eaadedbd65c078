from django.contrib import admin
from django.urls import include, path

from lode_site import views
from lode_site.api import api
from retrieval.ask_views import ask_page, ask_permalink
from retrieval.evidence_views import evidence_page
from retrieval.help_views import search_help

urlpatterns = [
    path("", views.home, name="home"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    path("notes/", include("notes.urls")),
    path("", include("externals.urls")),
    path("ask", ask_page, name="ask"),
    path("ask/<int:trace_id>", ask_permalink, name="ask-permalink"),
    path("search/help", search_help, name="search-help"),
    path("search", include("retrieval.urls")),
    path(
        "evidence/<int:document_id>/<int:version_id>/<int:passage_id>/<str:sha256>/",
        evidence_page,
        name="evidence",
    ),
]
