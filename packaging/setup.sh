#!/usr/bin/env bash
# Installs what Day0 Workbench needs on Debian 12, builds it, and then runs one job:
#   packaging/setup.sh run    install, build, start the workbench on its embedded demo
#                             (without a display: the headless demo on the terminal)
#   packaging/setup.sh test   install, build, run every test (what CI runs)
#   packaging/setup.sh build  install and build only
# Idempotent and non-interactive. Set DAY0_BUILD_DIR to build elsewhere (default: build/).
set -euo pipefail

mode="${1:-build}"
case "$mode" in run|test|build) ;; *) echo "usage: $0 [run|test|build]" >&2; exit 2 ;; esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${DAY0_BUILD_DIR:-$root/build}"

# Every Debian 12 package the project needs; keep in step with DESIGN.md §4.
packages=(
    build-essential cmake ninja-build pkg-config ccache git
    qt6-base-dev qt6-svg-dev libqcustomplot-dev libgl-dev
    nlohmann-json3-dev libsimdjson-dev libsqlite3-dev libssl-dev zlib1g-dev
    libopenblas-dev libcli11-dev libfmt-dev libicu-dev libcpp-httplib-dev
    libgtest-dev libgmock-dev libbenchmark-dev
    libopenmpi-dev openmpi-bin
    clang libclang-rt-14-dev
    python3 python3-numpy python3-torch
    nodejs
)
# The openai Node.js client test (tests/cli/openai_client) needs npm too; a nodejs that bundles it
# (NodeSource's) needs no separate package.
command -v npm >/dev/null || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done
if ((${#missing[@]})); then
    sudo=""
    if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
    echo "setup: installing ${missing[*]}" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

jobs="$(nproc)"
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache); fi
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=ON "${launcher[@]}" >/dev/null
cmake --build "$build" --parallel "$jobs"

case "$mode" in
build)
    echo "setup: built into $build" >&2
    ;;
test)
    # The official openai npm client, pinned by package-lock.json, for day0 serve's client test
    # (it skips, saying why, when this could not be installed).
    (cd "$root/tests/cli/openai_client" && npm ci --no-audit --no-fund >/dev/null) \
        || echo "setup: npm ci in tests/cli/openai_client failed; the openai client test will skip" >&2
    cd "$build"
    ctest --output-on-failure --parallel "$jobs" --timeout 900
    ;;
run)
    if [[ -x "$build/app/gui/day0-workbench" && ( -n "${DISPLAY:-}" || -n "${WAYLAND_DISPLAY:-}" ) ]]; then
        exec "$build/app/gui/day0-workbench"
    fi
    if [[ -x "$build/app/gui/day0-workbench" ]]; then
        echo "setup: no display found; running the headless demo instead of the workbench" >&2
    fi
    exec "$build/app/cli/day0" demo
    ;;
esac
