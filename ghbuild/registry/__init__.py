"""The OCI registry client: credentials, auth, manifests, blobs and cross-repository copies."""
