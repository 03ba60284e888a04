import sys

from sparkscope.alerts.generate import main

sys.exit(main(sys.argv[1:]))
