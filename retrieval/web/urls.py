from django.urls import path

from retrieval.web import search_views as views

app_name = "retrieval"
urlpatterns = [path("", views.search_page, name="search")]
