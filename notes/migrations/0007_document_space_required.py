import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("notes", "0006_document_space_filled")]

    operations = [
        migrations.AlterField(
            model_name="document",
            name="space",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.RESTRICT,
                related_name="documents",
                to="spaces.space",
            ),
        ),
    ]
