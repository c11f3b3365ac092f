"""Tests of durable_core.testing."""
