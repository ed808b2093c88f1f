#!/usr/bin/env python3
"""Waits up to 10 s until every given loopback TCP port accepts a connection; exits 1 if not.
Usage: scripts/wait-ports.py PORT...   (the test scripts start mock engines and probers with it)"""
import socket, sys, time

for _ in range(100):
    if all(socket.socket().connect_ex(("127.0.0.1", int(p))) == 0 for p in sys.argv[1:]):
        sys.exit(0)
    time.sleep(0.1)
sys.exit(f"ports {sys.argv[1:]} did not open")
