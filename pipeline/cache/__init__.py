"""The caches: what cpq keeps between runs so that a question asked again costs less.

`facade.Cache` is the one interface an assessment goes through (the saved results, their
update, the fact store).  Below it, and below the pipeline, are the pieces the loading of the
rules program uses too: every key (keys.py), the proof that a file read back is cpq's own
(trust.py) and the user cache of parsed programs (user_cache.py).  This file imports none of
them, so that using those pieces does not load the facade and the pipeline above it.
"""
