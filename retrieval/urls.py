from django.urls import path

from retrieval import views

app_name = "retrieval"
urlpatterns = [path("", views.search_page, name="search")]
