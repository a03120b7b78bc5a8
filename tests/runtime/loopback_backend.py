"""A backend added the way the runtime's layout promises: this one file plus one registry line.

test_layout.py adds BackendInfo("gloo-tagged", "tests.runtime.loopback_backend", "TaggedGlooBackend",
"processes", ...) to minitorch_dist.runtime.backends.BACKENDS and launches on it. It is gloo with a
different name and a count of the messages it posted, enough to show that every launcher path
(the pool, the worker's world group, sub-groups, Group.backend) goes through the registry.
"""

from __future__ import annotations

from minitorch_dist.runtime.transports.gloo import GlooBackend


class TaggedGlooBackend(GlooBackend):
    name = "gloo-tagged"
    posted = 0

    def isend(self, tensor, dst, tag, op):
        TaggedGlooBackend.posted += 1
        return super().isend(tensor, dst, tag, op)
