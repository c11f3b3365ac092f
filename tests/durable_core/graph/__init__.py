"""Tests of durable_core.graph."""
