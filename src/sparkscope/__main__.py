from sparkscope.cli import main

raise SystemExit(main())
