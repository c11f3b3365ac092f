"""Tests of durable_core.executors."""
