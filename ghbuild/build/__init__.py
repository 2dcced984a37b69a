"""The build stage: the buildx command, the engine and its builders, sccache, the build log and the layer audit."""
