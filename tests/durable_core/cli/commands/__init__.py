"""Tests of durable_core.cli.commands: one file per command."""
