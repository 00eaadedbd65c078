"""gunicorn's configuration for lode: `gunicorn -c python:lode_site.gunicorn_conf`.

`python3 -m lode_site.bootstrap run` and `deploy-local` start gunicorn with this module and
`--bind HOST:PORT` (and `--workers` for deploy-local); a systemd unit does the same
(docs/deploy.md). One threaded process per core, lode's own time budget inside gunicorn's
outer timeout, graceful reloads on SIGHUP, recycled workers, one inference thread each, and
an access log without query strings; the comment beside each setting says why its number.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
from pathlib import Path

from lode_site import env

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = env.data_dir(BASE_DIR)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


# One inference thread per process. Read by the workers' settings (they import Django after
# the fork). onnxruntime's default is a pool of one thread per core in every process, spinning
# between calls, so with a process per core each query's embedding kept every core busy.
# Measured (`bench/request_cpu.py`, SciFact, hybrid): 92 → 67 ms of CPU per search page,
# 83 → 59 per API search, for ~3 ms more wall time on an idle server (embedding 6 → 9 ms).
os.environ.setdefault("LODE_EMBED_THREADS", "1")

wsgi_app = "lode_site.wsgi:application"
proc_name = "lode"
# Processes and threads. A search is CPU work in Python and onnxruntime (embedding,
# reranking, highlighting) between short waits on the database and Chroma. The GIL and the
# embedder's lock serialise the CPU part inside one process, so CPU parallelism comes from
# processes: one per core, at most 8. Each holds its own embedding model (~300 MB resident
# warmed up, measured; the master 26 MB), which with the CPU-bound work keeps the count at
# cores rather than gunicorn's 2 × cores + 1. A few threads per process overlap the waits and
# slow clients, so a request waiting for PostgreSQL does not idle a core.
worker_class = "gthread"
workers = env.env_int("LODE_WEB_WORKERS", min(_cores(), 8), minimum=1)
threads = env.env_int("LODE_WEB_THREADS", 4, minimum=1)
# Time. Each request's work is bounded by lode's own budget (`lode_site/budget.py`: 10 s for
# reads, 30 s for asks, enforced in the database too); `timeout` only kills a process whose
# main loop has not checked in for that long. With threaded workers the main loop keeps
# checking in while requests run, even an ask waiting minutes on a remote model, so only a
# process stuck without releasing the GIL (a runaway regular expression) is killed.
timeout = 60
# Graceful: SIGTERM lets requests in flight finish for up to the ask budget; SIGHUP starts
# workers with fresh code and settings and retires the old ones once they finish, so no
# request is dropped (`bootstrap run` writes the master's pid to `pidfile` for that).
graceful_timeout = 30
keepalive = 5
# Recycling bounds slow memory growth (allocator fragmentation, caches); the jitter keeps the
# workers from all restarting at once.
max_requests = 2000
max_requests_jitter = 200
# No preload: Django, the model, onnxruntime's pool and the database and Chroma connections
# do not survive a fork safely, and SIGHUP can pick up new code only when the master never
# imported it. Each worker loads the model before its first request (`post_worker_init`).
preload_app = False

pidfile = str(DATA_DIR / "gunicorn.pid")
# gunicorn 27's control socket defaults to one path per user ($HOME/.gunicorn/gunicorn.ctl),
# which two lode instances of one user would fight over; lode is controlled with signals.
control_socket_disable = True
if Path("/dev/shm").is_dir():
    # The heartbeat file is touched constantly; in memory, a slow disk cannot make a healthy
    # worker look wedged (gunicorn's docs recommend this where /tmp is on disk).
    worker_tmp_dir = "/dev/shm"

# gunicorn trusts X-Forwarded-Proto from these addresses (127.0.0.1 by default) to mark a
# request secure. lode decides that in one place, Django's SECURE_PROXY_SSL_HEADER, set only
# with LODE_HTTPS=1 (a proxy in front): without a proxy, no client may claim HTTPS.
forwarded_allow_ips = ""

# Access log on stdout, one line per request, without the query string: search and ask text
# are the user's own words about their notes and stay out of logs. Behind a proxy the
# X-Forwarded-For header is logged beside the proxy's address.
accesslog = "-"
errorlog = "-"
access_log_format = (
    '%(h)s %({x-forwarded-for}i)s %(t)s "%(m)s %(U)s %(H)s" %(s)s %(B)s %(M)sms %(p)s'
)
# Request-line and header bounds (gunicorn's defaults, stated): a longer one is a 400.
limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 8190


def post_worker_init(worker: object) -> None:
    """Load the embedding model now, so the worker's first search does not wait for it.

    A model that cannot load is logged and left to search's own degraded path (lexical only,
    said on the page); it must not stop the worker from serving.
    """
    from retrieval.index.embeddings import EmbeddingUnavailable, get_embedder

    with contextlib.suppress(EmbeddingUnavailable):
        get_embedder()
    tune_garbage_collector()
    logging.getLogger("lode").debug("worker %s ready", os.getpid())


# Python's cyclic garbage collector, tuned for a long-lived web process: the objects loaded at
# start (Django, the model, Chroma's client: ~180,000) are frozen out of every later
# collection, and the youngest generation is collected after 10,000 net allocations rather
# than 2,000 (a search allocates tens of thousands of short-lived objects). Measured
# (SciFact, page and API, one at a time): ~2 ms of CPU per search spent collecting → ~0.7.
GC_THRESHOLDS = (10_000, 50, 100)


def tune_garbage_collector() -> None:
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
