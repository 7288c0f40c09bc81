"""Where each file's node ids start, the same whatever else the tree holds and whatever ran
before.

The extractor numbers a file's nodes from 0; loaded, they are shifted by the file's base.  A
file's base is derived from its path alone (a hash, to a slot of 2**26 ids), so it does not
depend on the files around it: an edit, a new file or a removed one leaves every other file's
ids as they were, an incremental update gives exactly the ids of a fresh run, and `cpq query`
answers alike either way.  Two paths whose hashes meet take the next free slots, in the order
the files are found.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

SLOT_BITS = 26  # ids per file: far more nodes than the largest file cpq reads can have
MAX_NODES = 1 << SLOT_BITS
_SLOTS = 1 << 36  # slots: ids stay below 2**62


def file_bases(relpaths: Iterable[str]) -> dict[str, int]:
    """The first node id of each file, for the files of one tree in discovery order."""
    taken: set[int] = set()
    bases: dict[str, int] = {}
    for relpath in relpaths:
        slot = int.from_bytes(
            hashlib.blake2b(relpath.encode("utf-8", "surrogatepass"), digest_size=8).digest()
        )
        slot %= _SLOTS
        while slot in taken:
            slot = (slot + 1) % _SLOTS
        taken.add(slot)
        bases[relpath] = slot << SLOT_BITS
    return bases
