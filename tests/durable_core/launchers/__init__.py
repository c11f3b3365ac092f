"""Tests of durable_core.launchers."""
