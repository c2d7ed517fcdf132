"""``python -m forge``: the same as the ``forge`` command."""

from __future__ import annotations

import sys

from forge.cli import main

sys.exit(main())
