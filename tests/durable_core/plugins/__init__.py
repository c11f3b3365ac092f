"""Tests of durable_core.plugins."""
