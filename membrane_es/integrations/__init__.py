"""Adapters that give agent frameworks membrane_es as their memory.

Each adapter lives in its own module and imports its framework there (a missing framework
is an ImportError naming the extra to install), so importing this package needs none of
them. Adapters use the engine's public API only (what :mod:`membrane_es` exports).
"""
