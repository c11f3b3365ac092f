"""Tests of durable_core.store."""
