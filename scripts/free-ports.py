#!/usr/bin/env python3
"""Prints N distinct free TCP ports on 127.0.0.1, space-separated.

Usage: scripts/free-ports.py N BAND

BAND (0-3) is the caller's own range of ports below Linux's ephemeral range (32768 and up):
the live demos run side by side, and a port one of them picked and let go could otherwise be
picked by another before its server binds it; the kernel never hands out ports below the
ephemeral range to outgoing connections either. All N are bound before any is closed, so they
are distinct. Read its output with command substitution (`read -r a b <<<"$(...)"`), which waits
for it to exit: read from a process substitution, the script went on while this process still
held the ports, and a server started at once failed to bind them ("Address already in use")."""
import random
import socket
import sys

n, band = int(sys.argv[1]), int(sys.argv[2])
lo = 20000 + 3000 * band
candidates = list(range(lo, lo + 3000))
random.shuffle(candidates)
sockets = []
for port in candidates:
    if len(sockets) == n:
        break
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        sockets.append(s)
    except OSError:
        s.close()
if len(sockets) < n:
    sys.exit(f"only {len(sockets)} of {n} free ports in band {band} ({lo}-{lo + 2999})")
print(" ".join(str(s.getsockname()[1]) for s in sockets))
