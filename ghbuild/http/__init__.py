"""HTTP for every client but PyGithub's: one session type, one retry policy."""
