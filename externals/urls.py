from django.urls import path

import lode_site.ids  # noqa: F401  (registers the `<id:...>` converter)
from externals import annotation_views, views

app_name = "externals"
urlpatterns = [
    path("sources/", views.source_list, name="sources"),
    path("sources/add/<str:kind>/", views.source_add, name="source-add"),
    path("sources/<id:source_id>/", views.source_detail, name="source"),
    path("sources/<id:source_id>/edit/", views.source_edit, name="source-edit"),
    path("sources/<id:source_id>/enabled/", views.source_enabled, name="source-enabled"),
    path("sources/<id:source_id>/delete/", views.source_delete, name="source-delete"),
    path("sources/<id:source_id>/scan/", views.scan_now, name="scan-now"),
    path("sources/<id:source_id>/move/", views.source_move, name="source-move"),
    path("sources/<id:source_id>/scan-status/", views.scan_status, name="scan-status"),
    path("sources/<id:source_id>/webhook-secret/", views.rotate_secret, name="rotate-secret"),
    path("externals/<id:document_id>/", views.external_detail, name="external"),
    path(
        "externals/<id:document_id>/snapshots/<id:version_id>/",
        views.snapshot_detail,
        name="snapshot",
    ),
    path(
        "externals/<id:document_id>/annotations/",
        annotation_views.annotation_add,
        name="annotation-add",
    ),
    path(
        "externals/<id:document_id>/annotations/<id:annotation_id>/delete/",
        annotation_views.annotation_delete_view,
        name="annotation-delete",
    ),
]
