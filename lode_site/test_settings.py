"""Settings for the test suite: the production settings with a throw-away data folder, so
tests never touch the developer's `var/` (database, Chroma, model folder, file caches).

Each pytest-xdist worker inherits the temporary folder of the process that started it and
takes a subfolder of its own, named by its worker id: workers clearing their file caches or
writing the default Chroma folder never see each other's files. A folder set for a child
process (`LODE_DATA_DIR` in its environment) is used as it is."""

import atexit
import os
import shutil
import tempfile
from pathlib import Path

if not os.environ.get("LODE_DATA_DIR"):
    _folder = tempfile.mkdtemp(prefix="lode-test-")
    os.environ["LODE_DATA_DIR"] = os.environ["LODE_TEST_RUN_DATA_DIR"] = _folder
    atexit.register(shutil.rmtree, _folder, ignore_errors=True)
if os.environ.get("PYTEST_XDIST_WORKER") and os.environ["LODE_DATA_DIR"] == os.environ.get(
    "LODE_TEST_RUN_DATA_DIR"
):
    os.environ["LODE_DATA_DIR"] = str(
        Path(os.environ["LODE_DATA_DIR"]) / os.environ["PYTEST_XDIST_WORKER"]
    )

from lode_site.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast logins in tests
# Tests mirror folders they create under the temporary directory, as ordinary users.
LODE_SOURCE_FOLDER_ROOTS = [tempfile.gettempdir()]
