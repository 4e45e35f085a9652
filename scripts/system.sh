# Sourced by demo.sh and test.sh: `need_system_package COMMAND PACKAGE WHY` makes sure a
# command from a Debian package is there. Missing, it is installed with apt-get when
# this runs as root (a fresh CI runner or container); otherwise the script stops and
# says which package to install. `need_venv PYTHON` does the same for the venv module
# (Debian and Ubuntu ship it apart from Python, as python3-venv).
_apt_install() {
  if [ -z "${_ANCHORED_APT_UPDATED:-}" ]; then
    apt-get update -qq
    _ANCHORED_APT_UPDATED=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

_can_apt() {
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1
}

need_system_package() {
  command -v "$1" >/dev/null 2>&1 && return 0
  if _can_apt; then
    _apt_install "$2"
  else
    echo "$1 is missing: run 'sudo apt-get install $2' ($3)" >&2
    exit 1
  fi
}

need_venv() {
  "$1" -c "import ensurepip, venv" >/dev/null 2>&1 && return 0
  if _can_apt; then
    _apt_install python3-venv
  else
    echo "$1 cannot make a virtual environment: run 'sudo apt-get install python3-venv'" >&2
    exit 1
  fi
}
