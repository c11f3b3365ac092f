"""Tests of the durable_filestore distribution."""
