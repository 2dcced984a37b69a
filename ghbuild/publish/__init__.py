"""The publish stage: build records, the lease, and moving staging images to the public tags."""
