"""Tests of the durable_postgresstore distribution."""
