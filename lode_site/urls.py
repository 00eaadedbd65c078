from django.contrib import admin
from django.urls import include, path

from lode_site import views
from lode_site.api import api

urlpatterns = [
    path("", views.home, name="home"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    path("notes/", include("notes.urls")),
    path("search", include("retrieval.urls")),
]
