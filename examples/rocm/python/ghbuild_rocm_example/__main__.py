import sys

from .selftest import main

sys.exit(main())
