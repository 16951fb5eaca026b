#!/usr/bin/env bash
# Lint template.yaml offline with cfn-lint and `sam validate --lint`. Both are installed (once,
# pinned) into a virtualenv at .tools/venv, which is gitignored. Extra arguments go to cfn-lint.
set -euo pipefail
cd "$(dirname "$0")/.."

CFN_LINT_VERSION="${CFN_LINT_VERSION:-1.58.0}"
SAM_CLI_VERSION="${SAM_CLI_VERSION:-1.170.0}"
venv=".tools/venv"
stamp="$venv/.installed-cfn-lint-$CFN_LINT_VERSION-sam-$SAM_CLI_VERSION"

if [ ! -f "$stamp" ]; then
  command -v python3 >/dev/null || { echo "python3 is needed" >&2; exit 1; }
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  echo "installing cfn-lint $CFN_LINT_VERSION and aws-sam-cli $SAM_CLI_VERSION into $venv" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "cfn-lint==$CFN_LINT_VERSION" "aws-sam-cli==$SAM_CLI_VERSION" >&2
  rm -f "$venv"/.installed-*
  touch "$stamp"
fi

echo "cfn-lint $("$venv/bin/cfn-lint" --version | awk '{print $2}')" >&2
"$venv/bin/cfn-lint" "$@" template.yaml
echo "cfn-lint: ok" >&2
# sam reads no credentials for validate --lint; a region keeps it from asking for one.
SAM_CLI_TELEMETRY=0 AWS_REGION="${AWS_REGION:-us-east-1}" "$venv/bin/sam" validate --lint --template-file template.yaml
