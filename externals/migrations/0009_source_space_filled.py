"""Existing sources move to their owner's personal space; then `space` is required.

The fill and the NOT NULL change stay in separate migrations, so separate transactions:
PostgreSQL refuses an ALTER TABLE on a table with pending deferred foreign-key checks from
the UPDATE in the same transaction.
"""

from django.db import migrations
from django.db.models import OuterRef, Subquery


def fill_source_space(apps, schema_editor):
    """Existing sources move to their owner's personal space (spaces 0002 made one each)."""
    model = apps.get_model("externals", "Source")
    space_model = apps.get_model("spaces", "Space")
    personal = space_model.objects.filter(personal_of_id=OuterRef("owner_id")).values("pk")[:1]
    model.objects.filter(space__isnull=True).update(space_id=Subquery(personal))


class Migration(migrations.Migration):
    dependencies = [("externals", "0008_source_space")]

    operations = [migrations.RunPython(fill_source_space, migrations.RunPython.noop)]
