import sys

from awm_engine.cli import main

sys.exit(main())
