"""PostgreSQL: the BM25 statistics the lexical leg ranks with (issue 14), filled from the head
passages already indexed. Nothing on SQLite: FTS5 keeps its own statistics.

The tables, functions and triggers are `retrieval.index.lexical.postgresql.BM25_SCHEMA_SQL`
(idempotent, so `lode_index repair` can run them again); see that module's docstring.
"""

from django.db import migrations


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    from retrieval.index.lexical import postgresql

    for statement in (*postgresql.BM25_SCHEMA_SQL, *postgresql.BM25_FILL_SQL):
        schema_editor.execute(statement)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    from retrieval.index.lexical import postgresql

    for statement in postgresql.BM25_DROP_SQL:
        schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0005_passage_logical_id_passage_page")]
    operations = [migrations.RunPython(create, drop)]
