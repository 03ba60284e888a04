from sparkscope.probes.blockprobe.probe import main

raise SystemExit(main())
