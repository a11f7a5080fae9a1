from membrane_es.cli import main

raise SystemExit(main())
