"""Content-addressed base images: their identity and ensuring one exists in the registry."""
