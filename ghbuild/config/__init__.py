"""The configuration stage: ghbuild.toml plus GHBUILD_* overrides, validated into typed Options."""
