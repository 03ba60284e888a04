from sparkscope_dev.suite import main

raise SystemExit(main())
