#!/usr/bin/env python3
"""Prints N distinct free TCP ports on 127.0.0.1, space-separated.

All N sockets are bound before any is closed: picked one at a time, the kernel may hand out a
port it just released twice, and two servers of a demo would then race for it."""
import socket
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1
sockets = [socket.socket() for _ in range(n)]
for s in sockets:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in sockets))
