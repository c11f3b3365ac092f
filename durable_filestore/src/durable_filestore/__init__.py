"""Durable's file store backend."""
