import sys

from sparkscope.dashboards import main

sys.exit(main(sys.argv[1:]))
