"""``NatsErrorMiddleware``: a NATS failure a view lets escape is a JSON 503/504/502 answer, not a 500 page."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse

from ...errors import NatsError
from ..process import error_status


class NatsErrorMiddleware:
    """Answers :class:`~natsjs_sync.NatsError` with ``{"error": ...}`` (see
    :func:`~natsjs_sync.contrib.process.error_status`); other exceptions pass on."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, NatsError):
            return None
        status, message = error_status(exception)
        return JsonResponse({"error": message}, status=status)
