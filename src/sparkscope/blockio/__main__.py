from sparkscope.blockio.probe import main

raise SystemExit(main())
