"""lode's settings: everything that varies comes from the environment via `lode_site.env`."""

from __future__ import annotations

import os
from pathlib import Path

from django.utils.csp import CSP

from lode_site import env

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = env.data_dir(BASE_DIR)

# Models must never be fetched at run time (see ../shared/MODELS.md).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# One BLAS thread: onnxruntime keeps its own pool, and two pools on 2 cores roughly double
# query latency (MODELS.md). Must be set before numpy is first imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

SECRET_KEY = env.secret_key(DATA_DIR)
DEBUG = env.env_bool("DEBUG", False)
ALLOWED_HOSTS = env.env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "ninja",
    "lode_site",
    "spaces",
    "notes",
    "externals",
    "retrieval.web.apps.RetrievalConfig",
    # After "retrieval" on purpose: retrieval's `db_worker` (which first queues a sweep for
    # vector work a killed worker left behind) must shadow the stock command.
    "django_tasks_db",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Content-Security-Policy from SECURE_CSP below (Django 6's built-in support).
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Permissions-Policy, and Cache-Control: private, no-store for signed-in users.
    "lode_site.middleware.SecurityHeadersMiddleware",
    # "Too many failed attempts; try again in N minutes" on the login pages.
    "lode_site.middleware.LoginLockoutMessageMiddleware",
    "lode_site.middleware.LodeLoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # After auth and htmx (its 503 page needs both): a time budget for each request's work,
    # enforced in the database too (lode_site/budget.py).
    "lode_site.budget.TimeBudgetMiddleware",
]

ROOT_URLCONF = "lode_site.urls"
WSGI_APPLICATION = "lode_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "spaces.context.spaces_context",
            ],
        },
    },
]

DATABASES = {"default": env.database(DATA_DIR)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Connections persist (CONN_MAX_AGE from env.database), so each is checked
    # before reuse at the start of a request or worker poll; one left dead by a server
    # restart is replaced instead of failing the request. A connection attempt gives up
    # after connect_timeout seconds rather than hanging while the server is down.
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("connect_timeout", 5)
    # The planner's cost of an index lookup (env.pg_random_page_cost), added to any startup
    # options the URL brings (`?currentSchema=` becomes `-c search_path=…`) unless they set
    # it themselves.
    if (page_cost := env.pg_random_page_cost()) is not None:
        DATABASES["default"]["OPTIONS"]["options"] = env.with_page_cost(
            DATABASES["default"]["OPTIONS"].get("options", ""), page_cost
        )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# Login throttling (lode_site/throttle.py): the throttle's backend refuses logins while a
# username or an address is locked out, before ModelBackend checks the password.
AUTHENTICATION_BACKENDS = [
    "lode_site.throttle.LoginThrottleBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Failed logins allowed per username, and per client address (higher: several people may
# share one), within a sliding window of this many minutes; past that, logins are refused
# until the window has moved on.
LODE_LOGIN_MAX_FAILURES = env.env_int("LODE_LOGIN_MAX_FAILURES", 5, minimum=1)
LODE_LOGIN_MAX_FAILURES_PER_IP = env.env_int("LODE_LOGIN_MAX_FAILURES_PER_IP", 20, minimum=1)
LODE_LOGIN_LOCKOUT_MINUTES = env.env_int("LODE_LOGIN_LOCKOUT_MINUTES", 15, minimum=1)
# Public read-only links: openings per client address in any 60 seconds, and in
# all per clock minute (spaces/public.py `view_refusal`; over either is a 429).
LODE_PUBLIC_LINK_VIEWS_PER_MINUTE = env.env_int("LODE_PUBLIC_LINK_VIEWS_PER_MINUTE", 60, minimum=1)
LODE_PUBLIC_LINK_TOTAL_VIEWS_PER_MINUTE = env.env_int(
    "LODE_PUBLIC_LINK_TOTAL_VIEWS_PER_MINUTE", 1200, minimum=1
)
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "notes:list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = env.env_str("TIME_ZONE", "UTC")
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)  # whitenoise warns on every request when it is missing
# Hashed, compressed copies served with far-future caching headers (lode_site/staticfiles.py).
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "lode_site.staticfiles.LodeStaticFilesStorage"},
}

# Caches shared by every worker process of this machine (folders in the data dir, so no
# extra service). Two aliases because a file cache culls a random third of its entries when
# full: rendered note parts (many, large, cheap to redo) must never evict the login and
# webhook failure counters (few, small, security-relevant).
CACHES = {
    # Counters: login throttling (lode_site/throttle.py), refused webhook deliveries. Django
    # lists the folder on every write, so the bound is generous but not unlimited.
    "default": {
        "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
        "LOCATION": str(DATA_DIR / "cache"),
        "TIMEOUT": 24 * 3600,
        "OPTIONS": {"MAX_ENTRIES": 50_000},
    },
    # Rendered note parts, keyed by the version's SHA-256 (notes/rendering.py).
    "renders": {
        "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
        "LOCATION": str(DATA_DIR / "cache-renders"),
        "TIMEOUT": 7 * 24 * 3600,
        "OPTIONS": {"MAX_ENTRIES": 2000},
    },
}

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads the token from the page, not the cookie
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True

# LODE_HTTPS=1: lode is served over HTTPS by a TLS proxy in front of it (nginx, Caddy, …)
# that sets X-Forwarded-Proto. Cookies are then sent over HTTPS only, plain-HTTP requests are
# redirected, and browsers are told (HSTS) to use HTTPS for a year. Off by default: lode's
# own server (`bootstrap run`) speaks plain HTTP on 127.0.0.1.
LODE_HTTPS = env.env_bool("LODE_HTTPS", False)
SESSION_COOKIE_SECURE = LODE_HTTPS
CSRF_COOKIE_SECURE = LODE_HTTPS
SECURE_SSL_REDIRECT = LODE_HTTPS
# Trust the proxy's X-Forwarded-Proto only when there is a proxy: without one, any client
# could claim its plain-HTTP request was secure.
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if LODE_HTTPS else None
SECURE_HSTS_SECONDS = 365 * 24 * 3600 if LODE_HTTPS else 0
# includeSubDomains covers only names *below* lode's host (lode at notes.example.com:
# *.notes.example.com, never example.com's other hosts), where nothing but lode should be.
SECURE_HSTS_INCLUDE_SUBDOMAINS = LODE_HTTPS
# No `preload`: putting a domain on the browsers' preload list commits the whole registrable
# domain, which is for its owner to decide (hstspreload.org), not for an app to declare.
SECURE_HSTS_PRELOAD = False
SILENCED_SYSTEM_CHECKS = ["security.W021"]  # "SECURE_HSTS_PRELOAD is not True": see above

# Content-Security-Policy (Django's ContentSecurityPolicyMiddleware). lode's pages, the admin
# and the API docs load scripts and styles only from lode's own static files: no inline
# <script>, no on*="" handlers, no style="" attributes or <style> blocks (htmx's injected
# indicator style is turned off in base.html and lives in lode.css), and no eval. Images come
# from lode itself, `data:` and only the hosts in LODE_REMOTE_IMAGE_HOSTS (comma-separated
# host names, default none): a note's image from anywhere else is shown as a link
# (notes/rendering.py), so no note can load a tracking pixel for the people who read it.
LODE_REMOTE_IMAGE_HOSTS = env.env_hosts("LODE_REMOTE_IMAGE_HOSTS")
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF, "data:", *(f"https://{host}" for host in LODE_REMOTE_IMAGE_HOSTS)],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.NONE],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}
# Permissions-Policy (lode_site.middleware.SecurityHeadersMiddleware): lode uses none of
# these browser features, so no page (and nothing injected into one) may ask for them.
LODE_PERMISSIONS_POLICY = {
    feature: []
    for feature in (
        "accelerometer",
        "camera",
        "display-capture",
        "geolocation",
        "gyroscope",
        "magnetometer",
        "microphone",
        "midi",
        "payment",
        "usb",
    )
}

# Upper bounds on what one request may carry; larger bodies get a clear 400/413.
DATA_UPLOAD_MAX_MEMORY_SIZE = env.env_int("LODE_MAX_REQUEST_BYTES", 5_000_000, minimum=1024)
LODE_MAX_NOTE_BYTES = env.env_int("LODE_MAX_NOTE_BYTES", 2_000_000, minimum=1024)
LODE_MAX_QUERY_CHARS = env.env_int("LODE_MAX_QUERY_CHARS", 1000, minimum=16)
# "Export your notes" on the settings page (lode_site/export_views.py): the zip is built in a
# temporary file and refused, with a message, past this many bytes of notes or seconds.
LODE_EXPORT_MAX_BYTES = env.env_int("LODE_EXPORT_MAX_BYTES", 200_000_000, minimum=1024)
LODE_EXPORT_MAX_SECONDS = env.env_int("LODE_EXPORT_MAX_SECONDS", 60, minimum=1)
# Time budgets (lode_site/budget.py), enforced in Python and in the database (SQLite progress
# handler, PostgreSQL statement_timeout); 0 turns one off. Reads of every page and endpoint
# get the first; asking gets the second (search plus local models plus the trace write; the
# answer model's network wait does not count). Other writes and /admin/ are not budgeted.
LODE_REQUEST_BUDGET_SECONDS = env.env_int("LODE_REQUEST_BUDGET_SECONDS", 10, minimum=0)
LODE_ASK_BUDGET_SECONDS = env.env_int("LODE_ASK_BUDGET_SECONDS", 30, minimum=0)
# Bounded search responses (retrieval/search/pipeline.py): each hit's parent context is a window of
# this many characters either side of the passage, and one response carries at most
# LODE_SEARCH_RESPONSE_MAX_CHARS characters of passage text, highlights and context (hits
# past it are trimmed and flagged; the evidence and note version endpoints give the rest).
# A notes list (GET /api/notes/) carries at most this many characters of note bodies; notes
# past it are listed with `body_omitted` (their own endpoint gives the body).
LODE_API_LIST_MAX_BODY_CHARS = env.env_int("LODE_API_LIST_MAX_BODY_CHARS", 4_000_000, minimum=1000)
LODE_SEARCH_CONTEXT_CHARS = env.env_int("LODE_SEARCH_CONTEXT_CHARS", 1000, minimum=0)
LODE_SEARCH_RESPONSE_MAX_CHARS = env.env_int(
    "LODE_SEARCH_RESPONSE_MAX_CHARS", 200_000, minimum=1000
)

# Chunking (retrieval/index/chunking.py): passage size bound in words and overlap between windows.
LODE_CHUNK_MAX_WORDS = env.env_int("LODE_CHUNK_MAX_WORDS", 200, minimum=20)
LODE_CHUNK_OVERLAP_WORDS = env.env_int("LODE_CHUNK_OVERLAP_WORDS", 20, minimum=0)
# ...and in characters (code points), so a long table line, code block or one giant "word"
# is cut too. 2,000 leaves ordinary prose alone: 200 (+20 overlap) words of it are ~1,100 to
# 1,700 characters (SciFact abstracts at 200 words: longest passage 1,708), while FTS5
# highlight() and ts_headline, whose cost grows faster than linearly with the matches in one
# passage, stay in the low milliseconds per passage. Raise it with LODE_CHUNK_MAX_WORDS.
LODE_CHUNK_MAX_CHARS = env.env_int("LODE_CHUNK_MAX_CHARS", 2000, minimum=200)
# The lexical index's backend module (dotted path); empty picks it by database vendor
# (retrieval/index/lexical/__init__.py VENDOR_BACKENDS).
LODE_LEXICAL_BACKEND = env.env_str("LODE_LEXICAL_BACKEND", "").strip()

# Background work (Django tasks): the database-backed queue run by `manage.py db_worker`.
# LODE_TASKS_BACKEND=django.tasks.backends.immediate.ImmediateBackend runs tasks inline instead.
TASKS = {
    "default": {
        "BACKEND": env.env_str("LODE_TASKS_BACKEND", "django_tasks_db.DatabaseBackend"),
    }
}

# Dense retrieval (retrieval/index/embeddings.py, retrieval/index/vectors.py;
# see ../shared/MODELS.md).
# LODE_MODEL_DIR: a ready model folder to use as-is; empty means assemble one into
# <data>/models/ from the pinned model packages.
LODE_MODEL_DIR = env.env_str("LODE_MODEL_DIR", "").strip()
# LODE_EMBED_THREADS: onnxruntime's threads for one embedding call; 0 means its default (a
# pool of one thread per core, which spins between calls). The web server sets 1 for its
# processes (lode_site/gunicorn_conf.py): they are one per core and embed one short query at
# a time, so a pool per process only adds threads spinning on cores the others need.
LODE_EMBED_THREADS = env.env_int("LODE_EMBED_THREADS", 0, minimum=0)
# CHROMA_URL (e.g. http://127.0.0.1:8001) selects a Chroma server; empty means the embedded
# PersistentClient at LODE_CHROMA_PATH.
CHROMA_URL = env.env_str("CHROMA_URL", "").strip()
LODE_CHROMA_PATH = DATA_DIR / "chroma"
# Collection names are <prefix>_<manifest key>, so several lode instances can share a server.
LODE_CHROMA_COLLECTION_PREFIX = env.env_str("LODE_CHROMA_COLLECTION_PREFIX", "lode")
# Upper bound on one Chroma server request, so a dead server degrades search quickly.
LODE_CHROMA_TIMEOUT_SECONDS = env.env_int("LODE_CHROMA_TIMEOUT_SECONDS", 5, minimum=1)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"errors": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "filters": {"require_debug_false": {"()": "django.utils.log.RequireDebugFalse"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler"},
        # Server errors with their tracebacks (Django's own console handler prints them only
        # with DEBUG on, so without this a 500 in production left no trace anywhere).
        "errors": {
            "class": "logging.StreamHandler",
            "formatter": "errors",
            "filters": ["require_debug_false"],
        },
    },
    "loggers": {
        "lode": {"handlers": ["console"], "level": env.env_str("LODE_LOG_LEVEL", "INFO")},
        "django.request": {"handlers": ["errors"], "level": "ERROR"},  # 5xx + traceback
        "django.security": {"handlers": ["errors"], "level": "ERROR"},  # refused requests
    },
}

# Rerank stage (retrieval/search/rerank.py): "learned" (default, ships with lode), "cross-encoder"
# (needs a local model folder) or "off".
LODE_RERANK = env.env_choice("LODE_RERANK", "learned", ("learned", "cross-encoder", "off"))
LODE_RERANK_MODEL_DIR = env.env_str("LODE_RERANK_MODEL_DIR", "")
LODE_RERANK_MODEL_NAME = env.env_str("LODE_RERANK_MODEL_NAME", "Xenova/ms-marco-MiniLM-L-6-v2")

# --- Cited answers ----------------------------------------------------------------------
# An OpenAI-compatible chat endpoint (`…/v1`); empty means the offline extractive answerer.
LODE_LLM_BASE_URL = env.env_str("LODE_LLM_BASE_URL", "").strip().rstrip("/")
LODE_LLM_MODEL = env.env_str("LODE_LLM_MODEL", "").strip()
LODE_LLM_API_KEY = env.env_str("LODE_LLM_API_KEY", "")
LODE_LLM_TIMEOUT_SECONDS = env.env_int("LODE_LLM_TIMEOUT_SECONDS", 60, minimum=1)
LODE_LLM_MAX_RETRIES = env.env_int("LODE_LLM_MAX_RETRIES", 2, minimum=0)
LODE_LLM_MAX_TOKENS = env.env_int("LODE_LLM_MAX_TOKENS", 1024, minimum=16)
# How JSON output is requested: OpenAI's `json_schema` (default), or `json_object` with the
# schema beside it for servers that only know that form (llama-cpp-python's server).
LODE_LLM_RESPONSE_FORMAT = env.env_choice(
    "LODE_LLM_RESPONSE_FORMAT", "json_schema", ("json_schema", "json_object")
)
# Let a chat answerer call read-only tools while answering (search notes, fetch a page,
# refresh a source item; retrieval/answer/tools.py). Off: one request per answer, as before.
LODE_ASK_TOOLS = env.env_bool("LODE_ASK_TOOLS", False)
# The chat answerer's model may refine each ask's retrieval plan (docs/planner.md): one more
# request per ask, with only the question in it. Off: the rules' plan is used as is.
LODE_PLAN_REFINE = env.env_bool("LODE_PLAN_REFINE", False)
# Who answers: auto (the chat endpoint when LODE_LLM_BASE_URL is set, else extractive),
# extractive, chat, or the dotted path of an Answerer class (checked at start-up).
LODE_ANSWERER = env.env_str("LODE_ANSWERER", "auto").strip() or "auto"
# Entailment stage of the faithfulness gate: none (fail closed), a local cross-encoder
# folder, an LLM judge over the same endpoint as the answerer, or the dotted path of a
# scorer class or factory (checked at start-up).
LODE_ENTAILMENT = env.env_str("LODE_ENTAILMENT", "none").strip() or "none"
LODE_ENTAILMENT_MODEL_DIR = env.env_str("LODE_ENTAILMENT_MODEL_DIR", "")
LODE_ENTAILMENT_MODEL_NAME = env.env_str(
    "LODE_ENTAILMENT_MODEL_NAME", "Xenova/ms-marco-MiniLM-L-6-v2"
)
# Evidence pack budget: items and characters of passage text handed to an answerer.
LODE_ASK_MAX_ITEMS = env.env_int("LODE_ASK_MAX_ITEMS", 12, minimum=1)
LODE_ASK_MAX_CHARS = env.env_int("LODE_ASK_MAX_CHARS", 12_000, minimum=200)
# What a remote model may be sent per ask: only pack items at or above the
# relevance floor (retrieval/data/relevance.json), best first, until their parent blocks fill
# this many characters (the best one always goes).
LODE_EGRESS_MAX_CHARS = env.env_int("LODE_EGRESS_MAX_CHARS", 8_000, minimum=500)
# The relevance step's threshold: unset = the one chosen on data and stored
# in retrieval/data/relevance.json; a value in (0, 1) overrides it (calibration runs, or a
# user who prefers more answers or fewer).
LODE_RELEVANCE_THRESHOLD = env.env_probability("LODE_RELEVANCE_THRESHOLD")
# With no claim passing the gate, a verified claim dropped only for relevance is shown as
# "Best match — check it" when its relevance score reaches this floor; unset = the floor
# chosen on data (retrieval/answer/decision.py BEST_MATCH_FLOOR).
LODE_BEST_MATCH_FLOOR = env.env_probability("LODE_BEST_MATCH_FLOOR")

# --- Externals --------------------------------------------------------------------------
# Largest file a source scan reads (ADR 0005's ingest.max_file_bytes); bigger is a failure
# and the previous snapshot stays searchable.
LODE_SOURCE_MAX_FILE_BYTES = env.env_int("LODE_SOURCE_MAX_FILE_BYTES", 2_000_000, minimum=1024)
# URL sources: one GET with these bounds; redirects are followed, each hop re-checked.
# The timeout is the deadline for the whole fetch (every hop and read), not per read.
LODE_FETCH_TIMEOUT_SECONDS = env.env_int("LODE_FETCH_TIMEOUT_SECONDS", 20, minimum=1)
LODE_FETCH_MAX_BYTES = env.env_int("LODE_FETCH_MAX_BYTES", 5_000_000, minimum=1024)
# A fetch slower than this (after a 5 s grace period) is cut off; 0 turns the check off.
LODE_FETCH_MIN_BYTES_PER_SECOND = env.env_int("LODE_FETCH_MIN_BYTES_PER_SECOND", 1000, minimum=0)
# Only globally routable addresses are fetched (SSRF) unless this is on.
LODE_FETCH_ALLOW_PRIVATE = env.env_bool("LODE_FETCH_ALLOW_PRIVATE", False)
# Folder sources read the server's disk: every account may mirror only folders inside these
# roots (comma-separated absolute paths; unset = ~/lode-imports, set empty = none), never
# lode's own folders (externals/folders.py).
LODE_SOURCE_FOLDER_ROOTS = env.folder_roots(
    "LODE_SOURCE_FOLDER_ROOTS",
    "~/lode-imports",
    lode_folders={"the data folder": DATA_DIR, "the project folder": BASE_DIR},
)
# Push-triggered re-index: largest webhook body accepted (larger → 413, unread).
LODE_WEBHOOK_MAX_BODY_BYTES = env.env_int("LODE_WEBHOOK_MAX_BODY_BYTES", 1_000_000, minimum=1024)
# Refused webhook deliveries allowed per remote address per five minutes (then 429 until
# the window ends); counted in the cache, logged, never written to the database.
LODE_WEBHOOK_MAX_FAILURES = env.env_int("LODE_WEBHOOK_MAX_FAILURES", 20, minimum=1)

# --- graph ------------------------------------------------------------------------------
# `related` edges (retrieval/index/related.py): documents of the same space whose mean
# passage vectors have at least this cosine similarity, at most LODE_RELATED_MAX (≤ 5) per
# document. The default is the threshold bench/related_threshold.py chose on the linked
# corpus (best F0.5 on its tune split; bench/README.md, "Related edges"); a value in (0, 1)
# overrides it.
LODE_RELATED_THRESHOLD = env.env_probability("LODE_RELATED_THRESHOLD") or 0.4
LODE_RELATED_MAX = env.env_int("LODE_RELATED_MAX", 5, minimum=0)
