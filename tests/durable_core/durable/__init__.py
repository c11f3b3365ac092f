"""Tests of durable_core.durable."""
