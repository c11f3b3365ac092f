"""Store conformance kit (a pytest plugin for Store backends)."""
