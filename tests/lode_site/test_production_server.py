"""`bootstrap run` serves lode in production form.

* gunicorn, not Django's development server (`Server: gunicorn`), with the static files
  hashed and compressed by whitenoise and sent with far-future caching headers, an access
  log on stdout that leaves the query string out, a graceful reload on SIGHUP to gunicorn
  (new workers, the port never closed) and a clean stop on SIGTERM to bootstrap;
* `--debug` keeps Django's development server (and DEBUG on);
* `manage.py check --deploy` with the settings the run command uses: clean behind a TLS
  proxy (`LODE_HTTPS=1`); without one, exactly the HTTPS warnings docs/operations.md explains;
* the gunicorn configuration's numbers come from the machine and the environment, and a bad
  value stops start-up.

Before the change `run` served with `runserver` (`Server: WSGIServer/0.2`), static files had
no hashed names (`max-age=60`), and the README named no check id.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.templatetags.static import static

from lode_site import bootstrap
from tests.factories import (
    STOP_TIMEOUT,
    assert_stopped_cleanly,
    child_env,
    children_of,
    free_port,
    is_alive,
    wait_until_serving,
)

ROOT = Path(__file__).resolve().parents[2]


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """GET without following redirects: (status, lower-cased headers, body)."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with opener.open(request, timeout=30) as response:
            return (
                response.status,
                {k.lower(): v for k, v in response.headers.items()},
                (response.read()),
            )
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read()


def start(args: list[str], data_dir: Path, log: Path, **extra_env: str) -> subprocess.Popen:
    env = child_env(data_dir) | extra_env
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "lode_site.bootstrap", *args],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def stop(process: subprocess.Popen, children: set[int], port: int, log: Path) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        code = process.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"bootstrap did not stop on SIGTERM:\n{log.read_text()[-2000:]}")
    assert code == 0, log.read_text()[-2000:]
    assert_stopped_cleanly(process.pid, children, port, log)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("lode-prod-data")


@pytest.mark.slow
def test_run_serves_with_gunicorn_and_reloads_gracefully(data_dir, tmp_path, started):
    port = free_port()
    log = tmp_path / "run.log"
    process = start(["run", "--port", str(port)], data_dir, log, LODE_WEB_WORKERS="2")
    started["pids"].add(process.pid)
    children = wait_until_serving(process.pid, port, log)
    started["pids"] |= children
    base = f"http://127.0.0.1:{port}"

    status, headers, body = get(f"{base}/accounts/login/?next=/search%3Fq%3Dpineapple")
    assert status == 200
    assert headers["server"] == "gunicorn"
    # The stylesheet has a hashed name, served by whitenoise with far-future caching and a
    # compressed copy.
    stylesheet = re.search(rb'href="(/static/lode\.[0-9a-f]{12}\.css)"', body)
    assert stylesheet, body[:2000]
    status, headers, _ = get(base + stylesheet.group(1).decode(), {"Accept-Encoding": "gzip"})
    assert status == 200
    assert "immutable" in headers["cache-control"]
    assert "max-age=315360000" in headers["cache-control"]
    assert headers.get("content-encoding") == "gzip"

    # The access log: one line per request on stdout, without the query string.
    time.sleep(0.5)
    text = log.read_text()
    assert re.search(r'"GET /accounts/login/ HTTP/1.1" 200 \d+ \d+ms', text), text[-2000:]
    assert "pineapple" not in text

    # SIGHUP to gunicorn: new workers replace the old ones; the port keeps answering.
    master = int((data_dir / "gunicorn.pid").read_text())
    assert master in children
    old_workers = children_of(master)
    assert len(old_workers) == 2
    started["pids"] |= old_workers
    os.kill(master, signal.SIGHUP)
    deadline = time.monotonic() + 120
    while True:
        assert get(f"{base}/accounts/login/")[0] == 200  # served throughout the reload
        workers = children_of(master)
        if len(workers) == 2 and not workers & old_workers:
            break
        assert time.monotonic() < deadline, f"workers not replaced:\n{log.read_text()[-2000:]}"
        time.sleep(0.3)
    started["pids"] |= workers
    assert is_alive(master)

    stop(process, children | workers, port, log)
    assert not any(is_alive(pid) for pid in old_workers | workers)


@pytest.mark.slow
def test_run_debug_serves_with_the_development_server(data_dir, tmp_path, started):
    port = free_port()
    log = tmp_path / "run.log"
    process = start(["run", "--debug", "--port", str(port)], data_dir, log)
    started["pids"].add(process.pid)
    children = wait_until_serving(process.pid, port, log)
    started["pids"] |= children
    status, headers, _ = get(f"http://127.0.0.1:{port}/accounts/login/")
    assert status == 200
    assert headers["server"].startswith("WSGIServer/")
    assert "Django's development server" in log.read_text()
    stop(process, children, port, log)


def test_web_server_command_is_gunicorn_unless_debugging():
    production = bootstrap.web_server_command("127.0.0.1", 8123, debug=False, workers=3)
    assert production[1:3] == ["-m", "gunicorn"]
    assert production[production.index("--bind") + 1] == "127.0.0.1:8123"
    assert production[production.index("--config") + 1] == "python:lode_site.gunicorn_conf"
    assert production[production.index("--workers") + 1] == "3"
    debugging = bootstrap.web_server_command("127.0.0.1", 8123, debug=True)
    assert debugging[1:3] == ["manage.py", "runserver"]
    assert bootstrap.bind_address("::1", 80) == "[::1]:80"
    assert bootstrap.bind_address("[::1]", 80) == "[::1]:80"


def test_gunicorn_configuration(monkeypatch, tmp_path):
    monkeypatch.setenv("LODE_DATA_DIR", str(tmp_path))
    # Set, then deleted, through monkeypatch: undoing both restores the variable as it was
    # before the test (a bare delenv of an absent variable records nothing to restore, and
    # the value the module sets would leak into later tests).
    monkeypatch.setenv("LODE_EMBED_THREADS", "0")
    monkeypatch.delenv("LODE_EMBED_THREADS")
    monkeypatch.delenv("LODE_WEB_WORKERS", raising=False)
    monkeypatch.delenv("LODE_WEB_THREADS", raising=False)
    import lode_site.gunicorn_conf as conf

    conf = importlib.reload(conf)
    assert conf.workers == min(len(os.sched_getaffinity(0)), 8)
    assert conf.threads == 4
    assert conf.worker_class == "gthread"
    assert conf.preload_app is False  # onnxruntime and connections must not cross a fork
    assert conf.graceful_timeout >= 30  # an ask in flight finishes (LODE_ASK_BUDGET_SECONDS)
    assert conf.timeout > conf.graceful_timeout
    assert conf.max_requests > 0 and 0 < conf.max_requests_jitter < conf.max_requests
    assert conf.accesslog == "-"
    assert "%(U)s" in conf.access_log_format and "%(r)s" not in conf.access_log_format
    assert conf.pidfile == str(tmp_path / "gunicorn.pid")
    assert conf.control_socket_disable is True
    assert conf.forwarded_allow_ips == ""  # Django's SECURE_PROXY_SSL_HEADER decides alone
    # One inference thread per web process, unless the environment says otherwise.
    assert os.environ["LODE_EMBED_THREADS"] == "1"
    monkeypatch.setenv("LODE_EMBED_THREADS", "2")
    conf = importlib.reload(conf)
    assert os.environ["LODE_EMBED_THREADS"] == "2"

    monkeypatch.setenv("LODE_WEB_WORKERS", "3")
    monkeypatch.setenv("LODE_WEB_THREADS", "2")
    conf = importlib.reload(conf)
    assert (conf.workers, conf.threads) == (3, 2)
    monkeypatch.setenv("LODE_WEB_WORKERS", "0")
    with pytest.raises(ImproperlyConfigured, match="LODE_WEB_WORKERS"):
        importlib.reload(conf)


def test_web_workers_freeze_what_they_loaded_and_collect_less_often():
    import gc

    import lode_site.gunicorn_conf as conf

    thresholds = gc.get_threshold()
    try:
        conf.tune_garbage_collector()
        assert gc.get_threshold() == conf.GC_THRESHOLDS
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


@pytest.mark.slow
def test_static_names_are_hashed_once_collected(settings, tmp_path):
    """Without `collectstatic` (tests, benches) `{% static %}` gives the plain name instead of
    a 500; after it, the hashed one."""
    settings.STATIC_ROOT = tmp_path / "static"
    settings.DEBUG = False
    assert static("lode.css") == "/static/lode.css"
    from django.core.management import call_command

    call_command("collectstatic", "--noinput", verbosity=0)
    assert re.fullmatch(r"/static/lode\.[0-9a-f]{12}\.css", static("lode.css"))
    assert (tmp_path / "static" / Path(static("lode.css")).name).with_suffix(".css.gz").exists()


# `manage.py check --deploy`, in a fresh process with the production settings: what it
# reports, and what it would report with nothing silenced.
CHECK_SCRIPT = """
import json, django
django.setup()
from django.core.checks import run_checks
issues = run_checks(include_deployment_checks=True)
reported = sorted(issue.id for issue in issues if not issue.is_silenced())
unsilenced = sorted(issue.id for issue in issues)
print(json.dumps({"reported": reported, "unsilenced": unsilenced}))
"""


def deploy_check(tmp_path: Path, **env: str) -> dict[str, list[str]]:
    environ = child_env(tmp_path / "data") | env | {"DJANGO_SETTINGS_MODULE": "lode_site.settings"}
    out = subprocess.run(
        [sys.executable, "-c", CHECK_SCRIPT],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.slow
def test_check_deploy_behind_a_tls_proxy_and_without(tmp_path):
    operations = (ROOT / "docs" / "operations.md").read_text()
    behind_proxy = deploy_check(tmp_path, LODE_HTTPS="1")
    assert behind_proxy["reported"] == []
    # The one silenced check, with its reason in settings.py and docs/operations.md.
    assert behind_proxy["unsilenced"] == ["security.W021"]
    plain_http = deploy_check(tmp_path, LODE_HTTPS="0")
    assert plain_http["reported"] == [
        "security.W004",
        "security.W008",
        "security.W012",
        "security.W016",
    ]
    for check_id in {*behind_proxy["unsilenced"], *plain_http["reported"]}:
        assert f"`{check_id}`" in operations, f"docs/operations.md does not explain {check_id}"
