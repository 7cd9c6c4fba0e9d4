#!/usr/bin/env bash
# Installs two schema validators from PyPI for the deploy/ recipes' test
# (tests/integration/deploy.rs): check-jsonschema, with the GitHub Actions
# and GitLab CI schemas it ships, and kubernetes-validate, with the
# Kubernetes API's. Both carry their schemas: no network at test time.
#
# One python3 venv in a cache folder outside the repo; the versions are
# pinned. Prints RALPH_CHECK_JSONSCHEMA_BIN=... and
# RALPH_KUBERNETES_VALIDATE_BIN=... for the caller to export.
#   RALPH_TEST_CACHE   cache root (default: ~/.cache/ralph-test)
set -euo pipefail

jsonschema="${RALPH_CHECK_JSONSCHEMA_VERSION:-0.39.0}"
kubernetes="${RALPH_KUBERNETES_VALIDATE_VERSION:-1.37.0}"
venv="${RALPH_TEST_CACHE:-$HOME/.cache/ralph-test}/schema-venv"
check="$venv/bin/check-jsonschema"
kube="$venv/bin/kubernetes-validate"

installed() {
    [[ -x "$check" && -x "$kube" ]] \
        && [[ "$("$check" --version 2>/dev/null | awk '{print $3}')" == "$jsonschema" ]] \
        && [[ "$("$kube" --version 2>/dev/null)" == "$kubernetes" ]]
}

if ! installed; then
    command -v python3 >/dev/null || { echo "install-schema-checkers: python3 is required" >&2; exit 1; }
    rm -rf "$venv"
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install --quiet --disable-pip-version-check \
        "check-jsonschema==$jsonschema" "kubernetes-validate==$kubernetes" >&2
    installed || { echo "install-schema-checkers: the validators did not install as pinned" >&2; exit 1; }
fi
echo "RALPH_CHECK_JSONSCHEMA_BIN=$check"
echo "RALPH_KUBERNETES_VALIDATE_BIN=$kube"
