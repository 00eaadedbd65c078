from django.urls import path

import lode_site.ids  # noqa: F401  (registers the `<id:...>` converter)
from spaces import views

app_name = "spaces"
urlpatterns = [
    path("", views.space_list, name="list"),
    path("new", views.space_create, name="create"),
    path("switch", views.space_switch, name="switch"),
    path("move/<id:document_id>", views.document_move, name="move"),
    path("<id:space_id>/", views.space_detail, name="detail"),
    path("<id:space_id>/settings", views.space_settings, name="settings"),
    path("<id:space_id>/delete", views.space_delete, name="delete"),
    path("<id:space_id>/leave", views.space_leave, name="leave"),
    path("<id:space_id>/members/add", views.member_add, name="member-add"),
    path("<id:space_id>/members/<id:user_id>/role", views.member_role, name="member-role"),
    path("<id:space_id>/members/<id:user_id>/remove", views.member_remove, name="member-remove"),
]
