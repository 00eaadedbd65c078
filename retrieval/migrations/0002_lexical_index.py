"""Create the lexical index for the database in use (FTS5 on SQLite, tsvector+GIN on PostgreSQL)."""

from django.db import migrations


def _module(schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        from retrieval.index.lexical import sqlite as module
    elif vendor == "postgresql":
        from retrieval.index.lexical import postgresql as module
    else:
        raise RuntimeError(f"lode has no lexical backend for {vendor}")
    return module


def create(apps, schema_editor):
    for statement in _module(schema_editor).SCHEMA_SQL:
        schema_editor.execute(statement)


def drop(apps, schema_editor):
    for statement in _module(schema_editor).DROP_SQL:
        schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0001_initial")]
    operations = [migrations.RunPython(create, drop)]
