"""``python -m membrane_es.cli``: the same as ``membrane-es``."""

from membrane_es.cli.app import main

raise SystemExit(main())
