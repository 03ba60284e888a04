from sparkscope.blockprobe.probe import main

raise SystemExit(main())
