"""Bounds and tree verifiers of 2025-2026 that spectheory checks exactly."""

from __future__ import annotations

ROWS: list = []
