"""Durable codec plugin for numpy arrays."""
