"""``path("healthz/nats", include("natsjs_sync.contrib.django.urls"))`` serves the health view."""

from __future__ import annotations

from django.urls import path

from .views import health

urlpatterns = [path("", health, name="nats-health")]
