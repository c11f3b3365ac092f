"""Durable's sqlite store backend."""
