"""Login throttling: too many failed password logins lock a username at an address, and an
address, for a while.

django-axes (8.3.1) declares support up to Django 6.0, not the 6.1 lode runs on, and brings
its own tables and middleware; this is a small cache-based throttle instead, on Django's
`default` cache (a folder shared by every worker process of the machine, see
settings.CACHES).

* Each failed password login (Django's `user_login_failed` signal, sent by `authenticate()`
  for every backend and view: `/accounts/login/`, `/admin/login/`) is recorded under the
  (username, client address) pair and under the address, as a list of failure times.
* `LoginThrottleBackend`, first in `AUTHENTICATION_BACKENDS`, refuses every attempt while
  `LODE_LOGIN_MAX_FAILURES` failures for the username at that address, or
  `LODE_LOGIN_MAX_FAILURES_PER_IP` for the address, fall within the last
  `LODE_LOGIN_LOCKOUT_MINUTES` (a sliding window) — before any password is checked, so the
  right password is refused too. Refused attempts are not counted, so the lock lifts when
  the window says it will.
* The username lock is per address (django-axes' `[["username", "ip_address"]]`): a lock
  keyed on the username alone would let any stranger keep an account (the admin's) locked
  out forever with five wrong passwords every quarter hour. The price: guesses spread over
  many addresses get `LODE_LOGIN_MAX_FAILURES` each, and each address is capped across all
  usernames by the per-address limit.
* A successful login clears its username's failures at that address (not the address's: an
  attacker who has one account must not be able to reset the counter for the address).
* `LoginLockoutMessageMiddleware` (lode_site/middleware.py) turns the refusal into "Too many
  failed attempts; try again in N minutes" on the login pages, with status 429.

Only web logins are throttled (`authenticate()` called with a request). The API has no
password login: bearer tokens are not passwords. Two attempts that race in two processes may
both be counted from the same old list (the file cache has no atomic update), so a burst of
parallel attempts can get a few more tries than the limit; sequential attempts cannot.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model, user_logged_in, user_login_failed
from django.contrib.auth.backends import ModelBackend
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.dispatch import receiver
from django.http import HttpRequest

CACHE_PREFIX = "lode:login-failures"
# Set on the request by the backend when it refuses an attempt; read by the middleware and
# by the failure recorder (a refused attempt is not a new failure).
REQUEST_ATTRIBUTE = "lode_login_lockout"


@dataclass(frozen=True)
class Lockout:
    """Logins are refused for `seconds` more (for the username, the address, or both)."""

    seconds: float

    @property
    def minutes(self) -> int:
        return max(1, math.ceil(self.seconds / 60))

    @property
    def message(self) -> str:
        unit = "minute" if self.minutes == 1 else "minutes"
        return f"Too many failed attempts; try again in {self.minutes} {unit}."


def now() -> float:
    """Wall-clock seconds: failure times are shared between processes through the cache
    (tests replace this to move time forward)."""
    return time.time()


def window_seconds() -> float:
    return settings.LODE_LOGIN_LOCKOUT_MINUTES * 60.0


def client_address(request: HttpRequest) -> str:
    """The address the request came from. Behind the TLS proxy that `LODE_HTTPS` implies,
    REMOTE_ADDR is the proxy's, so the last X-Forwarded-For entry (the one the proxy
    appended; earlier ones are the client's to invent) is used when present."""
    if settings.LODE_HTTPS:
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
        last = forwarded.rsplit(",", 1)[-1].strip()
        if last:
            return last
    return request.META.get("REMOTE_ADDR", "") or "unknown"


def _username_key(username: str, address: str) -> str:
    name = username.strip().casefold()
    digest = hashlib.sha256(f"{address}\n{name}".encode()).hexdigest()
    return f"{CACHE_PREFIX}:user:{digest}"


def _address_key(address: str) -> str:
    return f"{CACHE_PREFIX}:ip:{hashlib.sha256(address.encode('utf-8')).hexdigest()}"


def _recent_failures(key: str, at: float) -> list[float]:
    times = cache.get(key) or []
    return [t for t in times if at - window_seconds() < t <= at]


def _lockout_for(key: str, limit: int, at: float) -> float:
    """Seconds until `key` drops below `limit` failures in the window (0: not locked)."""
    recent = sorted(_recent_failures(key, at))
    if len(recent) < limit:
        return 0.0
    # Locked until the limit-th most recent failure leaves the window.
    return recent[-limit] + window_seconds() - at


def _keys_and_limits(username: str, request: HttpRequest) -> list[tuple[str, int]]:
    address = client_address(request)
    pairs = [(_address_key(address), settings.LODE_LOGIN_MAX_FAILURES_PER_IP)]
    if username:
        pairs.append((_username_key(username, address), settings.LODE_LOGIN_MAX_FAILURES))
    return pairs


def login_lockout(username: str, request: HttpRequest) -> Lockout | None:
    """The lockout in force for a login as `username` from `request`'s address, if any."""
    at = now()
    seconds = max(
        _lockout_for(key, limit, at) for key, limit in _keys_and_limits(username, request)
    )
    return Lockout(seconds) if seconds > 0 else None


def record_login_failure(username: str, request: HttpRequest) -> None:
    """Count one failed login for the username and the address."""
    at = now()
    for key, limit in _keys_and_limits(username, request):
        # Only the newest `limit` times matter for the lockout; keep the list that short.
        times = sorted([*_recent_failures(key, at), at])[-limit:]
        cache.set(key, times, timeout=int(window_seconds()) + 60)


def clear_login_failures(username: str, request: HttpRequest) -> None:
    """Forget the username's failures at the request's address (after a successful login)."""
    cache.delete(_username_key(username, client_address(request)))


def _username_from(credentials: dict[str, Any]) -> str:
    field = get_user_model().USERNAME_FIELD
    return str(credentials.get(field) or credentials.get("username") or "")


class LoginThrottleBackend(ModelBackend):
    """Refuses (PermissionDenied, which makes `authenticate()` stop and fail) any login while
    the username or the address is locked out; otherwise answers nothing and lets the next
    backend (ModelBackend) check the password.

    It is a ModelBackend so that sessions it is named in (`Client.force_login` picks the
    first backend) load their user like any other."""

    def authenticate(self, request: HttpRequest | None, **credentials: Any) -> None:
        if request is None:
            return None
        lockout = login_lockout(_username_from(credentials), request)
        if lockout is not None:
            setattr(request, REQUEST_ATTRIBUTE, lockout)
            raise PermissionDenied(lockout.message)
        return None


@receiver(user_login_failed, dispatch_uid="lode-login-throttle-failure")
def _on_login_failed(sender, credentials: dict[str, Any], request=None, **kwargs) -> None:
    if request is None or getattr(request, REQUEST_ATTRIBUTE, None) is not None:
        return
    record_login_failure(_username_from(credentials), request)


@receiver(user_logged_in, dispatch_uid="lode-login-throttle-success")
def _on_logged_in(sender, request=None, user=None, **kwargs) -> None:
    if user is not None and request is not None:
        clear_login_failures(user.get_username(), request)
