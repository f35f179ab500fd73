"""The health view: :func:`natsjs_sync.health.check_health` as JSON, 200 or 503."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from . import health as _health


@never_cache
@require_GET
def health(request: HttpRequest) -> JsonResponse:
    """Answer a probe: the health dict, status 200 (pass, warn) or 503 (fail)."""
    result = _health()
    return JsonResponse(result.as_dict(), status=result.http_status)
