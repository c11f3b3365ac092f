"""Tests of durable_core.cli."""
