"""Generated membrane.v1 stubs."""
