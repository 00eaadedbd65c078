from django.contrib import admin
from django.urls import include, path

from lode_site import ids, views  # noqa: F401  (ids registers the `<id:...>` converter first)
from lode_site.api import api
from lode_site.export_views import export_download
from lode_site.token_views import token_revoke_view, tokens_page
from retrieval.web.ask_views import ask_page, ask_permalink
from retrieval.web.evidence_views import evidence_page
from retrieval.web.graph_views import graph_ask_page, graph_query_page, graph_results_page
from retrieval.web.help_views import search_help
from retrieval.web.mcp_views import mcp_endpoint
from spaces import public_manage_views, public_views

urlpatterns = [
    path("", views.home, name="home"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    path("mcp", mcp_endpoint, name="mcp"),  # the MCP server for agents (docs/agents.md)
    path("settings/tokens", tokens_page, name="settings-tokens"),
    path("settings/export", export_download, name="settings-export"),
    path(
        "settings/tokens/<id:token_id>/revoke",
        token_revoke_view,
        name="settings-token-revoke",
    ),
    path("notes/", include("notes.urls")),
    # Public read-only links: the token page needs no login; managing
    # links is under share/ (spaces/public_manage_views.py).
    path("p/<str:token>", public_views.public_link_page, name="public-link"),
    path("share/links/new", public_manage_views.link_new, name="public-link-new"),
    path(
        "share/links/<id:link_id>/revoke",
        public_manage_views.link_revoke,
        name="public-link-revoke",
    ),
    path(
        "share/spaces/<id:space_id>/links",
        public_manage_views.space_links,
        name="public-links",
    ),
    path(
        "share/spaces/<id:space_id>/links/turn-on",
        public_manage_views.links_turn_on,
        name="public-links-turn-on",
    ),
    path("spaces/", include("spaces.urls")),
    path("", include("externals.urls")),
    path("ask", ask_page, name="ask"),
    path("ask/<id:trace_id>", ask_permalink, name="ask-permalink"),
    path("search/help", search_help, name="search-help"),
    path("graph/query", graph_query_page, name="graph-query"),
    path("graph/ask", graph_ask_page, name="graph-ask"),
    path("graph/results", graph_results_page, name="graph-results"),
    path("search", include("retrieval.web.urls")),
    path(
        "evidence/<id:document_id>/<id:version_id>/<id:passage_id>/<str:sha256>/",
        evidence_page,
        name="evidence",
    ),
]

# JSON under /api/, Django's pages elsewhere (lode_site/errors.py).
handler400 = "lode_site.errors.bad_request"
handler404 = "lode_site.errors.not_found"
handler500 = "lode_site.errors.server_error"
