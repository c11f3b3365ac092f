"""Tests of durable_core.records."""
