"""Adapters that give agent frameworks membrane_es as their memory, each an optional extra.

Every adapter goes through the engine's public surface (what ``membrane_es`` exports) only.
"""
