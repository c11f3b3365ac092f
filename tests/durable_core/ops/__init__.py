"""Tests of durable_core.ops."""
