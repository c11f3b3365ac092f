"""Durable's postgres store backend."""
