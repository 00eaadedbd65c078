"""Pages, forms and API endpoints over the layers below."""
