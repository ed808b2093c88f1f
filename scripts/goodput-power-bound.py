#!/usr/bin/env python3
"""The most any release test of goodput can find at the detector's error level.

An oracle that knows the baseline's bad share exactly, sees independent probes (no load, no
dependence), asks for no persistence and looks once a minute from the 4th minute after the
grace window (the detector looks so up to the 12th, then less often: more looks only raise the
bound) with the same share of the
error level per look (pooled goodput: armed_alpha 0.015 x 0.5 for goodput x 0.5 pooled, over the
15 looks of the window). It alarms at the first look whose bad count reaches the one-sided
Poisson critical value. Prints the share of releases it finds within the given minutes: the
detector's figure cannot exceed it.

    scripts/goodput-power-bound.py [--rate 0.5] [--before 0.995] [--after 0.97] [--minutes 15]
"""
import argparse
import math


def poisson_sf(k, lam):
    """P(X >= k) for X ~ Poisson(lam)."""
    return 1.0 - sum(math.exp(-lam) * lam**i / math.factorial(i) for i in range(k))


def critical(lam, level):
    k = 0
    while poisson_sf(k, lam) > level:
        k += 1
    return k


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=0.5, help="probes per second, all scenarios")
    ap.add_argument("--before", type=float, default=0.995, help="goodput before the release")
    ap.add_argument("--after", type=float, default=0.97, help="goodput after it")
    ap.add_argument("--minutes", type=int, default=15, help="minutes after the release")
    ap.add_argument("--grace-min", type=int, default=5)
    ap.add_argument("--alpha", type=float, default=0.015 * 0.5 * 0.5, help="pooled goodput's share of the level")
    ap.add_argument("--looks", type=int, default=15, help="looks in the whole window")
    a = ap.parse_args()
    per_bin = round(a.rate * 60)
    level = a.alpha / a.looks
    bins = a.minutes - a.grace_min
    # Exact: the distribution of the bad count so far among releases not yet found.
    dist = {0: 1.0}
    found = 0.0
    q = 1.0 - a.after
    binom = [math.comb(per_bin, j) * q**j * (1 - q) ** (per_bin - j) for j in range(per_bin + 1)]
    for b in range(1, bins + 1):
        new = {}
        for c, p in dist.items():
            for j, pj in enumerate(binom):
                new[c + j] = new.get(c + j, 0.0) + p * pj
        dist = new
        if b >= 4:
            k = critical((1 - a.before) * per_bin * b, level)
            found += sum(p for c, p in dist.items() if c >= k)
            dist = {c: p for c, p in dist.items() if c < k}
    print(f"{a.rate} probes/s, goodput {a.before} -> {a.after}: at most {found:.3f} found within {a.minutes} minutes "
          f"(per-look level {level:.2e}, {per_bin * bins} probes after the grace window)")


if __name__ == "__main__":
    main()
