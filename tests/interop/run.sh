#!/bin/sh
# Runs the aioquic interop cases (aioquic_interop.py) against a Squall binary and prints a
# markdown table. Needs `pip install aioquic`; not run by CI (aioquic is not in Debian 12).
#
#     tests/interop/run.sh [SQUALL_BINARY]        # default: target/release/squall
set -eu
here=$(cd "$(dirname "$0")" && pwd)
squall=${1:-target/release/squall}
dir=$(mktemp -d)
port=${PORT:-18443}
origin_port=$((port + 1))
trap 'kill $pid 2>/dev/null || true; rm -rf "$dir"' EXIT
mkdir "$dir/files"
head -c 5242880 /dev/urandom > "$dir/files/big.bin"
config() { # $1: [quic] lines
    cat <<CONF
[server]
workers = 2
[[certificate]]
hosts = ["localhost"]
self_signed = true
[[listen]]
address = "127.0.0.1:$port"
tls = true
protocols = ["h2", "http1", "h3"]
[quic]
$1
[[vhost]]
hosts = ["*"]
[[vhost.route]]
exact = "/"
respond = { status = 200, body = "hello\n" }
[[vhost.route]]
prefix = "/files/"
root = "$dir"
[[vhost.route]]
exact = "/ws"
proxy = "ws"
upgrade = ["websocket"]
[[upstream]]
name = "ws"
servers = [{ address = "127.0.0.1:$origin_port" }]
CONF
}
start() {
    config "$1" > "$dir/squall.toml"
    "$squall" --config "$dir/squall.toml" 2> "$dir/squall.log" &
    pid=$!
    for _ in $(seq 50); do
        grep -q "ready" "$dir/squall.log" && return 0
        sleep 0.1
    done
    cat "$dir/squall.log"; exit 1
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; }
echo "| case | result | detail |"
echo "|---|---|---|"
one() { # $1: case, $2: [quic] lines
    start "$2"
    if detail=$(python3 "$here/aioquic_interop.py" "$1" "127.0.0.1:$port" --big /files/big.bin 5242880 --origin-port "$origin_port" 2>&1); then
        result=pass
    else
        case $? in 2) result="not supported" ;; *) result=FAIL ;; esac
    fi
    stop
    echo "| $1 | $result | $(echo "$detail" | tail -1) |"
}
one handshake ""
one transfer ""
one multiplexing ""
one retry 'retry = "always"'
one resumption ""
one zerortt "early_data = true"
one chacha20 ""
one keyupdate ""
one v2 ""
one websocket ""
