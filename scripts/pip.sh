# Sourced by demo.sh and test.sh: `quiet_pip ARGS…` runs `python -m pip ARGS…` and
# passes on its output without two kinds of notice that say nothing is wrong:
# - setuptools announces every editable install of a package-dir layout ("Editable
#   installation … be careful with folders …");
# - a pip configuration that lists extra file:// indexes (as some build machines do)
#   warns once per package that an index has no page for it ("WARNING: Location
#   'file:///…/simple/<name>/' is ignored: it is neither a file nor a directory.").
# Anything else pip prints, and its exit status, come through.
quiet_pip() {
  local log rc=0
  log=$(mktemp)
  PYTHONWARNINGS="ignore:Editable installation" python -m pip "$@" >"$log" 2>&1 || rc=$?
  grep -v -E "^WARNING: Location '[^']*' is ignored: it is neither a file nor a directory\.$" \
    "$log" >&2 || true
  rm -f "$log"
  return "$rc"
}
