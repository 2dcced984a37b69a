#!/bin/sh
# Entrypoint of the ROCm example image: with no arguments run the self-test, else run the command.
#   docker run --rm $(ghbuild container-flags) IMAGE                 # self-test on the GPUs
#   docker run --rm IMAGE ghbuild-rocm-selftest --require-gpu --json # same, stricter
#   docker run --rm IMAGE python -c '...'                            # anything else
set -eu
if [ "$#" -eq 0 ]; then
    exec ghbuild-rocm-selftest
fi
exec "$@"
