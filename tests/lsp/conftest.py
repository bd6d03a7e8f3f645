import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
_compiler = os.path.join(os.path.dirname(os.path.dirname(_here)), "compiler")
sys.path.insert(0, _here)
if _compiler not in sys.path:
    sys.path.insert(0, _compiler)
