#!/bin/sh
# Installs a built Squall: the binary, the systemd unit, the logrotate rule, the docs the unit
# names, and a starting config (only if there is none). Build as your own user first
# (`cargo build --release -p squall`), then run from the checkout, as root:
#
#   sudo systemd/install.sh "${CARGO_TARGET_DIR:-target}/release/squall"
#   sudo systemd/install.sh            # finds the release binary itself, see below
#
# Without PATH it takes $CARGO_TARGET_DIR/release/squall, else asks cargo where it builds (a
# config's build.target-dir), else target/release/squall. Under sudo, cargo seldom answers:
# Debian's sudo sets HOME=/root and drops CARGO_TARGET_DIR, so a rustup toolchain installed
# in the user's home is not found; hence the binary is looked for without cargo too.
#
# DESTDIR=/some/root installs under that root instead (for packaging, and the tests).
set -eu
checkout=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -ge 1 ]; then
  bin=$1
elif [ -n "${CARGO_TARGET_DIR:-}" ]; then
  bin=$CARGO_TARGET_DIR/release/squall
else
  target_dir=$(cd "$checkout" && cargo metadata --format-version 1 --no-deps 2>/dev/null |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p') || target_dir=
  bin=${target_dir:-$checkout/target}/release/squall
fi
# A relative PATH is the caller's, from where they stand, before the cd below.
case $bin in
  /*) ;;
  *) bin=$PWD/$bin ;;
esac
cd "$checkout"
[ -x "$bin" ] || {
  echo "install.sh: no squall binary at $bin; build it as your user (cargo build --release -p squall), then run: sudo systemd/install.sh PATH-TO-BINARY" >&2
  exit 1
}
root=${DESTDIR:-}

install -D -m 0755 "$bin" "$root/usr/local/bin/squall"
install -D -m 0644 systemd/squall.service "$root/etc/systemd/system/squall.service"
install -D -m 0644 systemd/squall.logrotate "$root/etc/logrotate.d/squall"
for doc in README.md docs/OPERATIONS.md docs/CONFIG.md; do
  install -D -m 0644 "$doc" "$root/usr/share/doc/squall/$(basename "$doc")"
done
if [ -e "$root/etc/squall/squall.toml" ]; then
  echo "kept $root/etc/squall/squall.toml"
else
  install -D -m 0644 config/squall.toml "$root/etc/squall/squall.toml"
fi
echo "installed squall $("$root/usr/local/bin/squall" version | cut -d' ' -f2-) under ${root:-/}"
