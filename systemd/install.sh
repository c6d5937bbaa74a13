#!/bin/sh
# Installs a built Squall: the binary, the systemd unit, the logrotate rule, the docs the unit
# names, and a starting config (only if there is none). Run from a checkout, as root, after
# `cargo build --release -p squall`:
#
#   sudo systemd/install.sh            # the release binary cargo built
#   sudo systemd/install.sh PATH       # another binary
#
# DESTDIR=/some/root installs under that root instead (for packaging, and the tests).
set -eu
cd "$(dirname "$0")/.."
if [ $# -ge 1 ]; then
  bin=$1
else
  # Wherever cargo builds: CARGO_TARGET_DIR, a config's build.target-dir, or target/.
  target_dir=$(cargo metadata --format-version 1 --no-deps |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
  bin=$target_dir/release/squall
fi
[ -x "$bin" ] || { echo "install.sh: no squall binary at $bin; run cargo build --release -p squall" >&2; exit 1; }
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
