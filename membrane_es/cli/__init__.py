"""The ``membrane-es`` command line (Typer and rich): thin commands over the
:class:`~membrane_es.Membrane` facade.

Example::

    membrane-es demo --path ./demo-store
    membrane-es list ./demo-store --type semantic
    membrane-es history ./demo-store <record-id>
    membrane-es verify ./demo-store
    membrane-es serve --db ./demo-store --addr 127.0.0.1:9090
"""

from membrane_es.cli.app import app, main

__all__ = ["app", "main"]
