"""Signatures and provenance: who may sign (`policy`, pure), what BuildKit's provenance says (`provenance`, pure),
the cosign edge (`cosign`), and the one check publish and `ghbuild verify` share (`check`)."""
