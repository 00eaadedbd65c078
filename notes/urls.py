from django.urls import path

from notes import views

app_name = "notes"
urlpatterns = [
    path("", views.note_list, name="list"),
    path("new", views.note_create, name="create"),
    path("<int:note_id>", views.note_detail, name="detail"),
    path("<int:note_id>/edit", views.note_edit, name="edit"),
    path("<int:note_id>/delete", views.note_delete, name="delete"),
    path("<int:note_id>/history", views.note_history, name="history"),
    path("<int:note_id>/versions/<int:version_id>", views.version_detail, name="version"),
    path(
        "<int:note_id>/versions/<int:version_id>/restore",
        views.version_restore,
        name="restore",
    ),
]
