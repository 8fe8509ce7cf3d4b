"""Allocation-heavy Python for the `real` benchmark group (bench/run.py), run with
PYTHONMALLOC=malloc so that every object comes from the preloaded allocator instead of
pymalloc's arenas. It churns the shapes a Python program allocates: small objects with
an attribute dict, dicts keyed by strings, lists that grow and are dropped, strings
built, split and joined, tuples and ints, with a sliding window of live objects so that
blocks of every age are freed. Prints `checksum N`, which depends only on the work
(never on addresses, hashes or timing); bench/run.py checks it.

    python3 python.py [ROUNDS]
"""

import sys


class Record:
    def __init__(self, key, value, tags):
        self.key = key
        self.value = value
        self.tags = tags
        self.children = []


def churn(rounds):
    checksum = 0
    window = []
    index = {}
    for r in range(rounds):
        # objects with their own dict, strings and lists, linked into a small tree
        batch = []
        for i in range(200):
            key = "rec-%d-%d" % (r, i)
            rec = Record(key, i * r, [key[-3:], str(i % 7)] * (i % 5 + 1))
            if batch and i % 3:
                batch[(i * 7) % len(batch)].children.append(rec)
            batch.append(rec)
            index[key] = rec
        # a dict of lists, grown element by element, then flattened
        groups = {}
        for rec in batch:
            groups.setdefault(rec.tags[0], []).append(rec.value)
        flat = [v for k in sorted(groups) for v in groups[k]]
        checksum = (checksum * 31 + sum(flat) + len(groups)) % 1000000007
        # strings: build, split, join
        text = " ".join(rec.key for rec in batch[::4])
        words = text.split()
        joined = "|".join(w.upper() for w in words)
        checksum = (checksum + len(joined) + joined.count("REC")) % 1000000007
        # tuples and a list sorted by a key
        pairs = sorted(((len(rec.children), rec.value, rec.key) for rec in batch),
                       key=lambda p: (-p[0], p[1]))
        checksum = (checksum * 7 + pairs[0][0] * 1000 + pairs[-1][1]) % 1000000007
        # the sliding window: keep the newest batches, drop the oldest from the index
        window.append(batch)
        if len(window) > 100:
            for rec in window.pop(0):
                del index[rec.key]
        checksum = (checksum + len(index)) % 1000000007
    return checksum


if __name__ == "__main__":
    print("checksum %d" % churn(int(sys.argv[1]) if len(sys.argv) > 1 else 2000))
