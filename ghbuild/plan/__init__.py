"""The plan stage: which images and arches a run builds, with what trust, caches and tags. Pure: no I/O."""
