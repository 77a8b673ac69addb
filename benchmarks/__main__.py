"""``python -m benchmarks``: run the suite and rewrite docs/benchmarks.md."""

from benchmarks.run import main

raise SystemExit(main())
