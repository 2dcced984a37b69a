"""GitHub's side of a run: the event context ghbuild reads and the Actions I/O it writes
(outputs, summaries, annotations)."""
