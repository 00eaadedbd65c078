"""Settings → Access tokens: create a token for an agent or script (its secret shown once),
list yours, revoke one. Only your own tokens; writes are POST with CSRF.

    GET  /settings/tokens               the list and the form
    POST /settings/tokens               create, then redirect: the next GET shows the secret
                                        once (kept in the session only until then), so a
                                        reload neither repeats the create nor the secret
    POST /settings/tokens/<id>/revoke   revoke one of yours (someone else's is a 404)
"""

from __future__ import annotations

from datetime import timedelta

from django import forms
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from lode_site.models import ApiToken, token_create, token_revoke
from retrieval.eligibility import member_spaces

MAX_EXPIRY_DAYS = 3650
SECRET_SESSION_KEY = "lode_new_token_secret"
# The scopes in a few words (the page is read at 360 px too).
SCOPE_WORDS = {
    ApiToken.Scope.READ: "Search and read",
    ApiToken.Scope.READ_ASK: "Search, read and ask",
}


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, strip=True, label="Name")
    scope = forms.ChoiceField(
        choices=SCOPE_WORDS.items(), initial=ApiToken.Scope.READ, label="It may"
    )
    spaces = forms.TypedMultipleChoiceField(
        coerce=int,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Spaces",
        help_text="None ticked: every space you are a member of, now and later.",
    )
    expires_in_days = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_EXPIRY_DAYS,
        initial=90,
        label="Expires after (days)",
        help_text="Empty: never.",
    )

    def __init__(self, *args, user_id: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["spaces"].choices = [
            (space.pk, space.name) for space in member_spaces(user_id)
        ]


def _page(request: HttpRequest, form: TokenForm, secret: str = "", status: int = 200):
    tokens = (
        ApiToken.objects.filter(user=request.user)
        .prefetch_related("spaces")
        .order_by("-created_at", "-id")
    )
    return render(
        request,
        "settings/tokens.html",
        {"form": form, "tokens": tokens, "secret": secret},
        status=status,
    )


@require_http_methods(["GET", "POST"])
def tokens_page(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        secret = request.session.pop(SECRET_SESSION_KEY, "")
        return _page(request, TokenForm(user_id=request.user.pk), secret=secret)
    form = TokenForm(request.POST, user_id=request.user.pk)
    if not form.is_valid():
        return _page(request, form, status=400)
    days = form.cleaned_data["expires_in_days"]
    try:
        _, raw = token_create(
            user=request.user,
            name=form.cleaned_data["name"],
            scope=form.cleaned_data["scope"],
            space_ids=form.cleaned_data["spaces"],
            expires_at=timezone.now() + timedelta(days=days) if days else None,
        )
    except ValidationError as exc:
        form.add_error(None, exc)
        return _page(request, form, status=400)
    request.session[SECRET_SESSION_KEY] = raw
    return redirect("settings-tokens")


@require_POST
def token_revoke_view(request: HttpRequest, token_id: int) -> HttpResponse:
    token = ApiToken.objects.filter(pk=token_id, user=request.user).first()
    if token is None:
        raise Http404("No such token of yours.")
    token_revoke(token)
    messages.success(request, f"Revoked “{token.name}”: it stops working at once.")
    return redirect("settings-tokens")
