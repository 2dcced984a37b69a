"""Tests against a throwaway `docker-registry` process per module (the `registry_url` fixture)."""
