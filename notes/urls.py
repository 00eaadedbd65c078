from django.urls import path

import lode_site.ids  # noqa: F401  (registers the `<id:...>` converter)
from notes import views

app_name = "notes"
urlpatterns = [
    path("", views.note_list, name="list"),
    path("new", views.note_create, name="create"),
    path("preview", views.note_preview, name="preview"),
    path("complete", views.wiki_complete, name="complete"),
    path("trash", views.note_trash, name="trash"),
    path("trash/<id:note_id>/restore", views.note_undelete, name="undelete"),
    path("<id:note_id>", views.note_detail, name="detail"),
    path("<id:note_id>/edit", views.note_edit, name="edit"),
    path("<id:note_id>/delete", views.note_delete, name="delete"),
    path("<id:note_id>/history", views.note_history, name="history"),
    path("<id:note_id>/link-mention", views.link_mention, name="link-mention"),
    path("<id:note_id>/compare", views.note_compare, name="compare"),
    path("<id:note_id>/versions/<id:version_id>", views.version_detail, name="version"),
    path(
        "<id:note_id>/versions/<id:version_id>/restore",
        views.version_restore,
        name="restore",
    ),
]
