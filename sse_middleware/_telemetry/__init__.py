"""Telemetry through ``opentelemetry-api`` only: one span and a few GenAI-convention histograms per
stream, gap statistics in bounded memory, and the convention names."""
