"""Generated membrane_es.v1 stubs."""
