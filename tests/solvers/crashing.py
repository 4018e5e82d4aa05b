"""A backend that dies the way a native crash does (SIGSEGV), to test what a dead child answers."""

from __future__ import annotations

import os
import signal


class CrashingBackend:
    name = "crashing"
    engines = ("boom",)
    default_engine = "boom"

    def solve(self, model, options):
        os.kill(os.getpid(), signal.SIGSEGV)
