# Issue 16: the title as links and mentions match it, indexed.

from django.db import migrations, models

from notes.models import title_key


def fill_title_keys(apps, schema_editor):
    Document = apps.get_model("notes", "Document")
    batch = []
    for document in Document.objects.only("pk", "title").iterator(chunk_size=2000):
        document.title_key = title_key(document.title)
        batch.append(document)
        if len(batch) >= 2000:
            Document.objects.bulk_update(batch, ["title_key"])
            batch = []
    if batch:
        Document.objects.bulk_update(batch, ["title_key"])


class Migration(migrations.Migration):
    dependencies = [
        ("notes", "0008_owner_hand_over"),
    ]

    operations = [
        migrations.AddField(
            model_name="document",
            name="title_key",
            field=models.CharField(blank=True, db_index=True, default="", max_length=500),
        ),
        migrations.RunPython(fill_title_keys, migrations.RunPython.noop),
    ]
