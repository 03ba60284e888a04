import sys

from sparkscope.generate.steps import main

sys.exit(main(sys.argv[1:]))
