"""The read use cases: one function per query, each applying the trust rules."""
