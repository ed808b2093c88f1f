#!/usr/bin/env python3
"""Waits up to 30 s (a bound for a machine busy starting several demos at once, not a
measurement) until every given loopback TCP port accepts a connection; exits 1 if not.
Usage: scripts/wait-ports.py PORT...   (the test scripts start mock engines and probers with it)"""
import socket, sys, time

def open_(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", int(port))) == 0


for _ in range(300):
    if all(open_(p) for p in sys.argv[1:]):
        sys.exit(0)
    time.sleep(0.1)
sys.exit(f"ports {sys.argv[1:]} did not open")
