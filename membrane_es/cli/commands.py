"""Every command module, imported for the commands they register on the application."""

from membrane_es.cli import admin, changes, demo, inspector, reads, servers, writes

__all__ = ["admin", "changes", "demo", "inspector", "reads", "servers", "writes"]
