"""Errors of the telemetry shell; messages name the object and the field (or variable) at fault."""

from __future__ import annotations


class TelemetryError(ValueError):
    """A decision cannot be exported as given."""


class TelemetryConfigError(ValueError):
    """A telemetry setting (environment variable or argument) has a value that cannot be used."""
