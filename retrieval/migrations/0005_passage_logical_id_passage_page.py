"""Passage.page (PDF locator) and Passage.logical_id (externals' public identity).

On SQLite, Django adds a column with a default by rebuilding the table, which the lexical
index's view and triggers over `retrieval_passage` (0002) do not survive. Plain
`ALTER TABLE … ADD COLUMN` keeps them, so SQLite gets that; other vendors use the schema
editor as usual.
"""

from django.db import migrations, models

PAGE = models.PositiveIntegerField(blank=True, null=True)
LOGICAL_ID = models.CharField(blank=True, db_index=True, default="", max_length=64)

SQLITE_FORWARDS = [
    'ALTER TABLE "retrieval_passage" ADD COLUMN "page" integer unsigned NULL CHECK ("page" >= 0)',
    "ALTER TABLE \"retrieval_passage\" ADD COLUMN \"logical_id\" varchar(64) NOT NULL DEFAULT ''",
    'CREATE INDEX "retrieval_passage_logical_id_idx" ON "retrieval_passage" ("logical_id")',
]
SQLITE_BACKWARDS = [
    'DROP INDEX "retrieval_passage_logical_id_idx"',
    'ALTER TABLE "retrieval_passage" DROP COLUMN "logical_id"',
    'ALTER TABLE "retrieval_passage" DROP COLUMN "page"',
]


def _fields(apps):
    # RunPython sees the state before this migration, so the fields are built here.
    passage = apps.get_model("retrieval", "Passage")
    fields = []
    for name, template in (("page", PAGE), ("logical_id", LOGICAL_ID)):
        field = template.clone()
        field.set_attributes_from_name(name)
        field.model = passage
        fields.append(field)
    return passage, fields


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        for sql in SQLITE_FORWARDS:
            schema_editor.execute(sql)
        return
    passage, fields = _fields(apps)
    for field in fields:
        schema_editor.add_field(passage, field)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        for sql in SQLITE_BACKWARDS:
            schema_editor.execute(sql)
        return
    passage, fields = _fields(apps)
    for field in reversed(fields):
        schema_editor.remove_field(passage, field)


class Migration(migrations.Migration):
    dependencies = [
        ("retrieval", "0004_egress_log_and_traces"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddField(model_name="passage", name="logical_id", field=LOGICAL_ID),
                migrations.AddField(model_name="passage", name="page", field=PAGE),
            ],
            database_operations=[migrations.RunPython(forwards, backwards)],
        ),
    ]
