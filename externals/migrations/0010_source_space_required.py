import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("externals", "0009_source_space_filled")]

    operations = [
        migrations.AlterField(
            model_name="source",
            name="space",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.RESTRICT,
                related_name="sources",
                to="spaces.space",
            ),
        ),
    ]
