#!/usr/bin/env bash
# Installs the real codex CLI for the integration tests that drive it
# against a local stand-in for the OpenAI Responses API
# (tests/integration/real_codex.rs), in the style of install-claude.sh.
#
# The CLI lands in a cache folder outside the repo. The version is pinned:
# the stand-in speaks just enough of the API for the version it was observed
# with (../shared/reference/agent-clis-observed.md), so CI must not pick up a
# newer CLI by surprise.
#
#   RALPH_TEST_CACHE     cache root (default: ~/.cache/ralph-test)
#   RALPH_CODEX_VERSION  npm version to install instead of the pinned one
#
# Prints the path of the installed `codex` on stdout; everything else goes to
# stderr. Running it again with the binary already in place is a no-op.
set -euo pipefail

version="${RALPH_CODEX_VERSION:-0.171.0}"
prefix="${RALPH_TEST_CACHE:-$HOME/.cache/ralph-test}/codex"
bin="$prefix/node_modules/.bin/codex"

installed_version() {
    # `codex --version` prints e.g. "codex-cli 0.171.0".
    [[ -x "$bin" ]] && "$bin" --version 2>/dev/null | awk '{print $2}'
}

if [[ "$(installed_version || true)" != "$version" ]]; then
    command -v npm >/dev/null || { echo "install-agent-clis: npm is required" >&2; exit 1; }
    mkdir -p "$prefix"
    npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error \
        "@openai/codex@$version" >&2
    got="$(installed_version || true)"
    if [[ "$got" != "$version" ]]; then
        echo "install-agent-clis: expected codex $version at $bin, found '${got:-nothing}'" >&2
        exit 1
    fi
fi

echo "$bin"
