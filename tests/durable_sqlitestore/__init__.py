"""Tests of the durable_sqlitestore distribution."""
