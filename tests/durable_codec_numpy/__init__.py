"""Tests of the durable_codec_numpy distribution."""
