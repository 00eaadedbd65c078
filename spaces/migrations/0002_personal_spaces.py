"""Every existing account gets its personal space (issue 15): the user is its only member,
as admin. New accounts get theirs from `spaces.signals`."""

from django.conf import settings
from django.db import migrations


def create_personal_spaces(apps, schema_editor):
    user_model = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    space_model = apps.get_model("spaces", "Space")
    membership_model = apps.get_model("spaces", "Membership")
    have = set(space_model.objects.filter(personal_of__isnull=False).values_list("personal_of_id", flat=True))
    for user_id in user_model.objects.exclude(pk__in=have).values_list("pk", flat=True).iterator():
        space = space_model.objects.create(name="Personal", personal_of_id=user_id, created_by_id=user_id)
        membership_model.objects.create(space=space, user_id=user_id, role="admin")


class Migration(migrations.Migration):
    dependencies = [
        ("spaces", "0001_initial"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [migrations.RunPython(create_personal_spaces, migrations.RunPython.noop)]
