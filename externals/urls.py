from django.urls import path

from externals import annotation_views, views

app_name = "externals"
urlpatterns = [
    path("sources/", views.source_list, name="sources"),
    path("sources/add/<str:kind>/", views.source_add, name="source-add"),
    path("sources/<int:source_id>/", views.source_detail, name="source"),
    path("sources/<int:source_id>/scan/", views.scan_now, name="scan-now"),
    path("sources/<int:source_id>/scan-status/", views.scan_status, name="scan-status"),
    path("sources/<int:source_id>/webhook-secret/", views.rotate_secret, name="rotate-secret"),
    path("externals/<int:document_id>/", views.external_detail, name="external"),
    path(
        "externals/<int:document_id>/snapshots/<int:version_id>/",
        views.snapshot_detail,
        name="snapshot",
    ),
    path(
        "externals/<int:document_id>/annotations/",
        annotation_views.annotation_add,
        name="annotation-add",
    ),
]
