# shellcheck shell=bash
# bench/real/suite.sh — sourced by bench/run.sh when real-program rows
# (real_sqlite, real_python, real_python_16t, real_gcc, real_redis, real_ruby, real_sort, real_jq,
# real_git, real_node_16t, real_cppcheck: "real/run_real.sh ROW ...")
# are in the selected suite. Owns which Debian package each row needs:
#   real_packages      adds the missing ones to run.sh's install list (pkgs)
#   real_drop_missing  takes rows whose program is still missing out of SUITE,
#                      with a note in MISSING_NOTES (a skipped row, not a failure)
# It may read and change run.sh's arrays SUITE, pkgs and MISSING_NOTES only.

# real_needs ROW: "command package" pairs the row needs, one per line
real_needs() {
  case $1 in
    sqlite) echo "sqlite3 sqlite3" ;;
    python | python_mt) echo "/usr/bin/python3 python3" ;;
    node) echo "node nodejs" ;;
    gcc) echo "gcc gcc"; echo "cc gcc" ;; # cc builds the probe of every row
    redis) printf '%s\n' "redis-server redis-server" "redis-benchmark redis-tools" "redis-cli redis-tools" ;;
    ruby) echo "ruby ruby" ;;
    jq) echo "jq jq" ;;
    git) echo "git git" ;;
    cppcheck) echo "cppcheck cppcheck" ;;
  esac
  [ "$1" = gcc ] || echo "cc gcc"
}
real_have() { case $1 in /*) [ -x "$1" ] ;; *) command -v "$1" >/dev/null 2>&1 ;; esac; }
real_rows() { # the ROW of each selected real-program entry
  local e c
  for e in "${SUITE[@]}"; do
    IFS='|' read -r _ _ c <<<"$e"
    case $c in real/run_real.sh\ *) set -- $c; echo "$2" ;; esac
  done
}
real_packages() {
  local r cmd pkg
  for r in $(real_rows); do
    while read -r cmd pkg; do
      real_have "$cmd" || [[ " ${pkgs[*]} " == *" $pkg "* ]] || pkgs+=("$pkg")
    done < <(real_needs "$r")
  done
}
real_drop_missing() {
  local keep=() e c row cmd pkg miss
  for e in "${SUITE[@]}"; do
    IFS='|' read -r _ _ c <<<"$e"
    case $c in
      real/run_real.sh\ *)
        set -- $c; row=$2; miss=""
        while read -r cmd pkg; do
          real_have "$cmd" || miss="${miss:+$miss, }$cmd (Debian package $pkg)"
        done < <(real_needs "$row")
        if [ -n "$miss" ]; then
          MISSING_NOTES+=("${e%%|*}: $miss not installed; row skipped")
          continue
        fi ;;
    esac
    keep+=("$e")
  done
  SUITE=("${keep[@]+"${keep[@]}"}")
}
