"""Trust and keys: who is calling (API keys, their tenants) and the most they may read."""
