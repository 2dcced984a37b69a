# ghbuild's sccache helper for RUN steps. POSIX sh; sourced, not executed:
#
#   . /usr/local/lib/ghbuild/sccache.sh
#   ghbuild_sccache_start STAGE PORT     # exports GHBUILD_LAUNCHER ("sccache" or "")
#   ... compile with CMAKE_<LANG>_COMPILER_LAUNCHER="$GHBUILD_LAUNCHER", RUSTC_WRAPPER ...
#   ghbuild_sccache_finish STAGE         # writes /ghbuild/stats/STAGE.json, stops the server
#
# Why a server is started explicitly: sccache does not fall back to plain compiling when its storage
# check fails at start; every wrapped compile then fails (often as CMake's "compiler cannot compile a
# simple program"). So start it first, and on failure step down: read-write/read-only -> anonymous
# read -> local disk -> no launcher, saying so each time.
#
# Inputs (build args, set only when non-empty): GHBUILD_SCCACHE_MODE (read-write|read-only|anonymous|
# local|off), SCCACHE_BUCKET, SCCACHE_REGION, SCCACHE_ENDPOINT, SCCACHE_S3_KEY_PREFIX, SCCACHE_S3_USE_SSL.
# Credentials only from the BuildKit secret file /run/secrets/sccache_aws (KEY=VALUE lines).

GHBUILD_SCCACHE_SECRET=/run/secrets/sccache_aws
GHBUILD_SCCACHE_LOCAL_DIR=/root/.cache/sccache

_ghbuild_say() { echo "ghbuild-sccache: $*" >&2; }

_GHBUILD_S3_VARS="SCCACHE_BUCKET SCCACHE_REGION SCCACHE_ENDPOINT SCCACHE_S3_KEY_PREFIX SCCACHE_S3_USE_SSL"

# Keep the build args' values before any mode unsets them (as GHBUILD_ARG_<name>).
_ghbuild_save_args() {
    for _v in $_GHBUILD_S3_VARS; do
        eval "GHBUILD_ARG_$_v=\${$_v:-}"
    done
}

_ghbuild_export_nonempty() {
    for _v in $_GHBUILD_S3_VARS; do
        eval "_val=\${GHBUILD_ARG_$_v:-}"
        if [ -n "$_val" ]; then export "$_v=$_val"; else unset "$_v"; fi
    done
}

_ghbuild_unset_remote() {
    unset SCCACHE_BUCKET SCCACHE_REGION SCCACHE_ENDPOINT SCCACHE_S3_KEY_PREFIX SCCACHE_S3_USE_SSL \
          SCCACHE_S3_NO_CREDENTIALS AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN
}

_ghbuild_load_credentials() {
    [ -r "$GHBUILD_SCCACHE_SECRET" ] || return 1
    while IFS='=' read -r _k _rest; do
        case "$_k" in
            AWS_ACCESS_KEY_ID|AWS_SECRET_ACCESS_KEY|AWS_SESSION_TOKEN) export "$_k=$_rest" ;;
        esac
    done < "$GHBUILD_SCCACHE_SECRET"
    [ -n "${AWS_ACCESS_KEY_ID:-}" ] && [ -n "${AWS_SECRET_ACCESS_KEY:-}" ]
}

# Configure the environment for one mode; returns 1 when the mode cannot apply here.
_ghbuild_configure() {
    _ghbuild_unset_remote
    unset SCCACHE_DIR
    case "$1" in
        read-write|read-only)
            _ghbuild_export_nonempty
            [ -n "${SCCACHE_BUCKET:-}" ] || return 1
            _ghbuild_load_credentials || { _ghbuild_unset_remote; return 1; } ;;
        anonymous)
            _ghbuild_export_nonempty
            [ -n "${SCCACHE_BUCKET:-}" ] || return 1
            export SCCACHE_S3_NO_CREDENTIALS=true ;;
        local)
            export SCCACHE_DIR="$GHBUILD_SCCACHE_LOCAL_DIR" ;;
        *) return 1 ;;
    esac
}

# $1 if that loopback TCP port is free, else one the kernel picks. Builds may share the host's network
# (--network host), so a fixed port could belong to another build's sccache server, and using that
# server would compile into the other build's container.
_ghbuild_free_port() {
    if command -v python3 >/dev/null 2>&1; then
        python3 - "$1" <<'PY'
import socket, sys
for port in (int(sys.argv[1]), 0):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
        print(s.getsockname()[1])
        break
PY
    else
        echo "$1"
    fi
}

# The line of sccache's error output that says what went wrong (not a backtrace frame).
_ghbuild_cause() {
    printf '%s\n' "$1" | grep -v -E '^[[:space:]]*([0-9]+:|at )' | grep -i -E 'error|refused|denied|failed|timed out|invalid|not found' \
        | tail -n 1 | cut -c1-200
}

_ghbuild_next_mode() {
    case "$1" in
        read-write|read-only) echo anonymous ;;
        anonymous) echo local ;;
        *) echo off ;;
    esac
}

ghbuild_sccache_start() {
    GHBUILD_STAGE="$1"
    SCCACHE_SERVER_PORT=$(_ghbuild_free_port "$2")
    export SCCACHE_SERVER_PORT SCCACHE_IDLE_TIMEOUT=0 CARGO_INCREMENTAL=0
    GHBUILD_STAGE_STARTED=$(date +%s)
    GHBUILD_SCCACHE_REQUESTED="${GHBUILD_SCCACHE_MODE:-off}"
    GHBUILD_SCCACHE_FALLBACKS=""
    GHBUILD_LAUNCHER=""
    _ghbuild_save_args
    _mode="$GHBUILD_SCCACHE_REQUESTED"
    if ! command -v sccache >/dev/null 2>&1; then
        [ "$_mode" = off ] || _ghbuild_say "$GHBUILD_STAGE: sccache is not installed: compiling without it"
        _mode=off
    fi
    while [ "$_mode" != off ]; do
        if _ghbuild_configure "$_mode"; then
            if _err=$(sccache --start-server 2>&1); then
                GHBUILD_LAUNCHER=sccache
                break
            fi
            _why=$(_ghbuild_cause "$_err")
            [ -n "$_why" ] || _why=$(printf '%s\n' "$_err" | head -n 1 | cut -c1-200)
            # A server that half-started on our port must not serve the next mode.
            sccache --stop-server >/dev/null 2>&1 || true
        else
            _why="not possible here (no bucket or no credentials)"
        fi
        _next=$(_ghbuild_next_mode "$_mode")
        _ghbuild_say "$GHBUILD_STAGE: mode $_mode failed: $_why; falling back to $_next"
        GHBUILD_SCCACHE_FALLBACKS="${GHBUILD_SCCACHE_FALLBACKS}${GHBUILD_SCCACHE_FALLBACKS:+,}$_mode"
        _mode="$_next"
    done
    [ "$_mode" = off ] && _ghbuild_unset_remote
    GHBUILD_SCCACHE_EFFECTIVE="$_mode"
    export GHBUILD_LAUNCHER
    if [ -n "$GHBUILD_LAUNCHER" ]; then export RUSTC_WRAPPER=sccache; else unset RUSTC_WRAPPER; fi
    _ghbuild_say "$GHBUILD_STAGE: mode $GHBUILD_SCCACHE_EFFECTIVE (requested $GHBUILD_SCCACHE_REQUESTED), port $SCCACHE_SERVER_PORT"
}

ghbuild_sccache_finish() {
    _stage="$1"
    mkdir -p /ghbuild/stats
    _stats=null
    if [ -n "$GHBUILD_LAUNCHER" ]; then
        # Collected before the server stops: the numbers die with it.
        _stats=$(sccache --show-stats --stats-format=json 2>/dev/null) || _stats=null
        [ -n "$_stats" ] || _stats=null
        sccache --stop-server >/dev/null 2>&1 || true
    fi
    _finished=$(date +%s)
    printf '{"stage":"%s","requested_mode":"%s","mode":"%s","fallbacks":"%s","started":%s,"finished":%s,"sccache":%s}\n' \
        "$_stage" "$GHBUILD_SCCACHE_REQUESTED" "$GHBUILD_SCCACHE_EFFECTIVE" "$GHBUILD_SCCACHE_FALLBACKS" \
        "$GHBUILD_STAGE_STARTED" "$_finished" "$_stats" > "/ghbuild/stats/$_stage.json"
    _ghbuild_unset_remote
}
