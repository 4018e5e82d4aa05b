"""Backends whose child dies before it answers: the way a native crash does (SIGSEGV), or quietly with exit
status 0 (native code calling ``exit``), to test what a dead child answers."""

from __future__ import annotations

import os
import signal


class CrashingBackend:
    name = "crashing"
    engines = ("boom",)
    default_engine = "boom"

    def solve(self, model, options):
        os.kill(os.getpid(), signal.SIGSEGV)


class ExitingBackend(CrashingBackend):
    def solve(self, model, options):
        os._exit(0)
