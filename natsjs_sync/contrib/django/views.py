"""The health view: the readiness of the process's client, 200 or 503, details only for who may see them."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from ..process import health_answer
from . import _current_settings, get_holder


@never_cache
@require_safe
def health(request: HttpRequest) -> JsonResponse:
    """Answer a probe (GET, or HEAD: the same status and headers, no body).

    The body is ``{"status": ...}`` (``"pass"``, ``"warn"``: 200; ``"fail"``:
    503); what each check measured is added for the callers
    ``NATS["health_details"]`` lets see it.
    """
    body, status = health_answer(get_holder(), _current_settings().health_details, request)
    return JsonResponse(body, status=status)
