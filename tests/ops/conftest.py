"""Fixtures of the ops tests."""

from __future__ import annotations

import pathlib

import pytest


@pytest.fixture
def config_home(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    """A home and ``XDG_CONFIG_HOME`` of the test's own: the real ``~/.config/nats`` is never
    read or written. No context is named by the environment (``NATS_CONTEXT``, ``NATS_URL``)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("NATS_CONTEXT", raising=False)
    monkeypatch.delenv("NATS_URL", raising=False)
    return home
