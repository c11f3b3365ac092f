"""Tests of the durable-core distribution (package durable_core)."""
