"""Run `manage.py` with every passage embedding logged: `python tests/embed_probe.py ARGS…`.

For the scale-out test (tests/retrieval/index/test_workers_scaleout.py) and the throughput
benchmark: each input the embedder returns a vector for is appended to `$LODE_EMBED_PROBE_LOG` as
"pid<TAB>input sha256<TAB>call start<TAB>call end" (time.time()) once the model call
returns, so "was this passage embedded twice?" is a count of lines. One write per call with
O_APPEND, so lines of several processes never interleave. Not imported by lode itself.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")


def install(log_path: str) -> None:
    from retrieval.index import embeddings

    original = embeddings.Embedder.embed_passages

    def embed_passages(self, texts):  # type: ignore[no-untyped-def]
        started = time.time()
        vectors = original(self, texts)
        if texts:
            ended = time.time()
            lines = "".join(
                f"{os.getpid()}\t{embeddings.input_sha256(t)}\t{started:.3f}\t{ended:.3f}\n"
                for t in texts
            )
            fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, lines.encode())
            finally:
                os.close(fd)
        return vectors

    embeddings.Embedder.embed_passages = embed_passages  # type: ignore[method-assign]


if __name__ == "__main__":
    import django
    from django.core.management import execute_from_command_line

    django.setup()
    log = os.environ.get("LODE_EMBED_PROBE_LOG")
    if log:
        install(log)
    execute_from_command_line(["manage.py", *sys.argv[1:]])
