# shellcheck shell=bash
# Cases for tests/unit/shellcheck.sh (make check): no finding of shellcheck in
# scripts/ and tests/ (settings in .shellcheckrc; a check is disabled only
# inline, with its reason).

# Every shell file: a sh or bash shebang, or a `# shellcheck shell=` line
# first (the sourced files). Found by content, so a new script is checked
# without being listed anywhere.
shell_files() {
  local f first
  while IFS= read -r -d '' f; do
    IFS= read -r first <"$f" || true
    case $first in
      '#!/bin/sh'* | '#!/bin/bash'* | '#!/usr/bin/env bash'* | '#!/usr/bin/env sh'* | '# shellcheck shell='*)
        printf '%s\n' "$f" ;;
    esac
  done < <(find "$REPO/scripts" "$REPO/tests" -type f -print0 | sort -z)
}

test_scripts_and_tests_are_shellcheck_clean() {
  command -v shellcheck >/dev/null || { echo "SKIP: shellcheck is not installed (Debian package shellcheck)"; exit 77; }
  local files out
  mapfile -t files < <(shell_files)
  [ "${#files[@]}" -ge 40 ] || fail "found only ${#files[@]} shell files under $REPO/scripts and $REPO/tests"
  echo "${#files[@]} files, $(shellcheck --version | sed -n 's/^version: //p')"
  out=$(cd "$REPO" && shellcheck -f gcc "${files[@]}" 2>&1) || fail "shellcheck findings:
$out"
}
