#!/usr/bin/env bash
# Installs the real codex, gemini, opencode (npm) and aider (PyPI) CLIs for the
# integration tests that drive them against a local stand-in for their model APIs
# (tests/integration/real_codex.rs, real_gemini.rs, real_opencode.rs, real_aider.rs),
# in the style of install-claude.sh.
#
# The CLI lands in a cache folder outside the repo. The version is pinned:
# the stand-in speaks just enough of the API for the version it was observed
# with (../shared/reference/agent-clis-observed.md), so CI must not pick up a
# newer CLI by surprise.
#
#   RALPH_TEST_CACHE     cache root (default: ~/.cache/ralph-test)
#   RALPH_CODEX_VERSION, RALPH_GEMINI_VERSION, RALPH_OPENCODE_VERSION
#                        npm versions instead of the pinned ones
#   RALPH_AIDER_VERSION  the aider-chat version from PyPI (a python3 venv)
#
# Prints `RALPH_CODEX_BIN=<path>`, `RALPH_GEMINI_BIN=…`, `RALPH_OPENCODE_BIN=…` and
# `RALPH_AIDER_BIN=…` lines on stdout
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

# aider lives in its own python3 venv: `aider --version` prints "aider 0.86.2".
install_aider() { # <version>
    local version="$1"
    local venv="${RALPH_TEST_CACHE:-$HOME/.cache/ralph-test}/aider-venv"
    local bin="$venv/bin/aider"
    installed() { [[ -x "$bin" ]] && "$bin" --version 2>/dev/null | awk '{print $2}'; }
    if [[ "$(installed || true)" != "$version" ]]; then
        command -v python3 >/dev/null || { echo "install-agent-clis: python3 is required" >&2; return 1; }
        rm -rf "$venv"
        python3 -m venv "$venv" >&2
        "$venv/bin/pip" install --quiet --disable-pip-version-check "aider-chat==$version" >&2
        local got
        got="$(installed || true)"
        if [[ "$got" != "$version" ]]; then
            echo "install-agent-clis: expected aider $version at $bin, found '${got:-nothing}'" >&2
            return 1
        fi
    fi
    echo "$bin"
}

# `codex --version` prints "codex-cli 0.171.0"; gemini and opencode the bare version.
codex="$(install codex @openai/codex "${RALPH_CODEX_VERSION:-0.171.0}" codex 2)"
gemini="$(install gemini @google/gemini-cli "${RALPH_GEMINI_VERSION:-0.61.0}" gemini 1)"
opencode="$(install opencode opencode-ai "${RALPH_OPENCODE_VERSION:-1.18.33}" opencode 1)"
aider="$(install_aider "${RALPH_AIDER_VERSION:-0.86.2}")"
echo "RALPH_CODEX_BIN=$codex"
echo "RALPH_GEMINI_BIN=$gemini"
echo "RALPH_OPENCODE_BIN=$opencode"
echo "RALPH_AIDER_BIN=$aider"
