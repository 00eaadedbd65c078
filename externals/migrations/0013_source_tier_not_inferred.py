"""Sources no longer carry the "inferred" tier (it is an edge's): such sources, and the
externals copied from them, become stale external snapshots, the lowest tier a source has."""

from django.db import migrations


def lower_inferred_sources(apps, schema_editor):
    Source = apps.get_model("externals", "Source")
    Document = apps.get_model("notes", "Document")
    Source.objects.filter(trust_tier="inferred").update(trust_tier="external_stale")
    Document.objects.filter(kind="external", trust_tier="inferred").update(
        trust_tier="external_stale"
    )


class Migration(migrations.Migration):
    dependencies = [
        ("externals", "0012_source_discovered_via"),
        ("notes", "0009_document_title_key"),
    ]

    operations = [migrations.RunPython(lower_inferred_sources, migrations.RunPython.noop)]
