"""Tests of durable_core.config."""
