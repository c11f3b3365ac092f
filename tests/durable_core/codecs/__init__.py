"""Tests of durable_core.codecs."""
