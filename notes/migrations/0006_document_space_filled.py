"""Existing documents move to their owner's personal space; then `space` is required.

The fill and the NOT NULL change stay in separate migrations, so separate transactions:
PostgreSQL refuses an ALTER TABLE on a table with pending deferred foreign-key checks from
the UPDATE in the same transaction.
"""

from django.db import migrations
from django.db.models import OuterRef, Subquery


def fill_document_space(apps, schema_editor):
    """Existing documents move to their owner's personal space (spaces 0002 made one each)."""
    model = apps.get_model("notes", "Document")
    space_model = apps.get_model("spaces", "Space")
    personal = space_model.objects.filter(personal_of_id=OuterRef("owner_id")).values("pk")[:1]
    model.objects.filter(space__isnull=True).update(space_id=Subquery(personal))


class Migration(migrations.Migration):
    dependencies = [("notes", "0005_document_space_and_more")]

    operations = [migrations.RunPython(fill_document_space, migrations.RunPython.noop)]
