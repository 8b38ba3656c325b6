"""Test-only cores with one deliberately broken rule (filled in below)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.simulation import core

VARIANTS: dict[str, Callable[..., Any]] = {}


def node_class(variant: str) -> Callable[..., Any]:
    return core.RaftNode if variant == "real" else VARIANTS[variant]
