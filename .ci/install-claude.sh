#!/usr/bin/env bash
# Installs the real Claude Code CLI for the integration tests that drive it
# against a local stand-in for the Anthropic API (tests/integration/real_claude.rs).
#
# The CLI lands in a cache folder outside the repo, so it never shows up in
# `git status` and survives `cargo clean`. The version is pinned: the stand-in
# speaks just enough of the API for the version it was observed with, so CI
# must not pick up a newer CLI by surprise.
#
#   RALPH_TEST_CACHE      cache root (default: ~/.cache/ralph-test)
#   RALPH_CLAUDE_VERSION  npm version to install instead of the pinned one
#
# Prints the path of the installed `claude` binary on stdout; everything else
# goes to stderr. Running it again with the binary already in place is a no-op.
set -euo pipefail

version="${RALPH_CLAUDE_VERSION:-2.1.332}"
prefix="${RALPH_TEST_CACHE:-$HOME/.cache/ralph-test}/claude"
bin="$prefix/node_modules/.bin/claude"

installed_version() {
    # `claude --version` prints e.g. "2.1.332 (Claude Code)".
    [[ -x "$bin" ]] && "$bin" --version 2>/dev/null | awk '{print $1}'
}

if [[ "$(installed_version || true)" != "$version" ]]; then
    command -v npm >/dev/null || { echo "install-claude: npm is required" >&2; exit 1; }
    mkdir -p "$prefix"
    npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error \
        "@anthropic-ai/claude-code@$version" >&2
    got="$(installed_version || true)"
    if [[ "$got" != "$version" ]]; then
        echo "install-claude: expected claude $version at $bin, found '${got:-nothing}'" >&2
        exit 1
    fi
fi

echo "$bin"
