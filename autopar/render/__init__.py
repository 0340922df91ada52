"""Rendering: rich tables, JSON, terminal charts and schedules, plots."""
