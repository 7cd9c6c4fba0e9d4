#!/usr/bin/env bash
# Installs the real codex, gemini and opencode CLIs for the integration tests that
# drive them against a local stand-in for their model APIs
# (tests/integration/real_codex.rs, real_gemini.rs, real_opencode.rs), in the style of
# install-claude.sh.
#
# The CLI lands in a cache folder outside the repo. The version is pinned:
# the stand-in speaks just enough of the API for the version it was observed
# with (../shared/reference/agent-clis-observed.md), so CI must not pick up a
# newer CLI by surprise.
#
#   RALPH_TEST_CACHE     cache root (default: ~/.cache/ralph-test)
#   RALPH_CODEX_VERSION, RALPH_GEMINI_VERSION, RALPH_OPENCODE_VERSION
#                        npm versions instead of the pinned ones
#
# Prints `RALPH_CODEX_BIN=<path>`, `RALPH_GEMINI_BIN=…` and `RALPH_OPENCODE_BIN=…` lines on stdout
# (for `export`); everything else goes to stderr. Running it again with the
# binaries in place is a no-op.
set -euo pipefail

install() { # <name> <npm package> <version> <bin> <version field of --version>
    local name="$1" package="$2" version="$3" bin_name="$4" field="$5"
    local prefix="${RALPH_TEST_CACHE:-$HOME/.cache/ralph-test}/$name"
    local bin="$prefix/node_modules/.bin/$bin_name"
    installed() { [[ -x "$bin" ]] && "$bin" --version 2>/dev/null | awk -v f="$field" '{print $f}'; }
    if [[ "$(installed || true)" != "$version" ]]; then
        command -v npm >/dev/null || { echo "install-agent-clis: npm is required" >&2; return 1; }
        mkdir -p "$prefix"
        npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "$package@$version" >&2
        local got
        got="$(installed || true)"
        if [[ "$got" != "$version" ]]; then
            echo "install-agent-clis: expected $name $version at $bin, found '${got:-nothing}'" >&2
            return 1
        fi
    fi
    echo "$bin"
}

# `codex --version` prints "codex-cli 0.171.0"; gemini and opencode the bare version.
codex="$(install codex @openai/codex "${RALPH_CODEX_VERSION:-0.171.0}" codex 2)"
gemini="$(install gemini @google/gemini-cli "${RALPH_GEMINI_VERSION:-0.61.0}" gemini 1)"
opencode="$(install opencode opencode-ai "${RALPH_OPENCODE_VERSION:-1.18.33}" opencode 1)"
echo "RALPH_CODEX_BIN=$codex"
echo "RALPH_GEMINI_BIN=$gemini"
echo "RALPH_OPENCODE_BIN=$opencode"
