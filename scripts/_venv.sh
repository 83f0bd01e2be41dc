# Sourced by scripts/demo and scripts/test: make .venv with a suitable Python and install toolwire into it.
# Usage: ensure_venv EXTRAS   (EXTRAS: "cli,server" for the commands, "dev" for the test tools: everything)
#
# - The interpreter is $PYTHON, else the first of python3, python3.13, python3.12, python3.11 that is 3.11+.
# - A .venv made by another interpreter version (or one whose interpreter is gone) is made again.
# - The install (uv, else pip) runs only when pyproject.toml or the interpreter changed since the last
#   install, or the extras asked for are not all installed ("dev" holds them all); a stamp in .venv holds
#   the hash and the extras. The install is editable, so source changes need none.
# - The install's progress is shown, one line per step, and its whole log kept in .venv/install.log.

UV_VERSION=0.13.9

_find_python() {
    local candidate
    for candidate in ${PYTHON:-} python3 python3.13 python3.12 python3.11; do
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys, venv; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
        if [ -n "${PYTHON:-}" ] && [ "$candidate" = "$PYTHON" ]; then
            echo "PYTHON=$PYTHON is not a Python 3.11+ with venv." >&2
            return 1
        fi
    done
    echo "toolwire needs Python 3.11 or newer with venv; set PYTHON=/path/to/python3.11+ and run this again." >&2
    return 1
}

ensure_venv() {
    local extras=$1 py want have stamp spec
    py=$(_find_python) || exit 1
    want=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    if [ -e .venv ]; then
        have=$(.venv/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo none)
        if [ "$have" != "$want" ]; then
            echo "== .venv was made by Python $have; making it again with $py (Python $want)"
            rm -rf .venv
        fi
    fi
    if [ ! -x .venv/bin/python ]; then
        echo "== making .venv with $py (Python $want)"
        "$py" -m venv .venv
    fi
    stamp=$( { cat pyproject.toml; echo "python=$want"; } | "$py" -c \
        'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())')
    if [ -f .venv/.toolwire-installed ] && _stamp_covers "$stamp" "$extras"; then
        return 0
    fi
    spec=.
    [ -n "$extras" ] && spec=".[$extras]"
    echo "== installing toolwire${extras:+ with [$extras]} into .venv (the first time takes a moment)"
    rm -f .venv/.toolwire-installed
    # uv (pinned) installs the same packages as pip, from the same index, in seconds instead of a minute and a half
    # (a fresh .venv with [dev]: 16 s against 95 s); pip does it where uv cannot be installed or fails.
    { { .venv/bin/python -m pip install --disable-pip-version-check --progress-bar off --quiet "uv==$UV_VERSION" &&
        .venv/bin/uv pip install --python .venv/bin/python -e "$spec"; } ||
      .venv/bin/python -m pip install --disable-pip-version-check --progress-bar off -e "$spec"
      echo $? > .venv/.pip-status; } 2>&1 | tee .venv/install.log |
        { grep --line-buffered -E '^(Collecting|Installing collected|Successfully|Resolved|Installed)' || true; } |
        sed -u -e 's/^/   /' -e 's/^\(.\{110\}\).*/\1.../'
    if [ "$(cat .venv/.pip-status)" != 0 ]; then
        cat .venv/install.log
        echo "Installing toolwire failed (log above, also in .venv/install.log)." >&2
        exit 1
    fi
    echo "$stamp $extras" > .venv/.toolwire-installed
}

# True when the last install was of this pyproject.toml and Python, with every extra asked for.
_stamp_covers() {
    local hash installed extra
    read -r hash installed < .venv/.toolwire-installed || return 1
    [ "$hash" = "$1" ] || return 1
    case ",$installed," in *,dev,*) return 0 ;; esac
    for extra in ${2//,/ }; do
        case ",$installed," in *,"$extra",*) ;; *) return 1 ;; esac
    done
}
