import sys

from vxc.cli import main

sys.exit(main())
