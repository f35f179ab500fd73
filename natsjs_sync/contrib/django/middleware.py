"""``NatsErrorMiddleware``: a NATS failure a view lets escape is a JSON 503/504/502 answer, not a 500 page."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponse, JsonResponse

from ...errors import NatsError
from ..process import error_status


class NatsErrorMiddleware:
    """Answers :class:`~natsjs_sync.NatsError` with ``{"error": ...}`` (see
    :func:`~natsjs_sync.contrib.process.error_status`); other exceptions pass on.

    Sync and async: under an ASGI server it stays async, so an async view is
    not moved to a thread of its own (and back) for it."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]):
        self.get_response = get_response
        self._async = iscoroutinefunction(get_response)
        if self._async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> HttpResponse | Awaitable[HttpResponse]:
        if self._async:
            return self._acall(request)
        response: HttpResponse = self.get_response(request)
        return response

    async def _acall(self, request: HttpRequest) -> HttpResponse:
        response: HttpResponse = await self.get_response(request)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, NatsError):
            return None
        status, message = error_status(exception)
        return JsonResponse({"error": message}, status=status)
