"""Self-hosted runner care: health checks before a GPU job, bounded diagnostics after a failure."""
