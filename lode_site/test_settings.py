"""Settings for the test suite: the production settings with a throw-away data folder, so
tests never touch the developer's `var/` (database, Chroma, model folder)."""

import atexit
import os
import shutil
import tempfile

if not os.environ.get("LODE_DATA_DIR"):
    _folder = tempfile.mkdtemp(prefix="lode-test-")
    os.environ["LODE_DATA_DIR"] = _folder
    atexit.register(shutil.rmtree, _folder, ignore_errors=True)

from lode_site.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast logins in tests
# Tests mirror folders they create under the temporary directory, as ordinary users.
LODE_SOURCE_FOLDER_ROOTS = [tempfile.gettempdir()]
