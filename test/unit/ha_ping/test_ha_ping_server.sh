#!/usr/bin/env bash
# ctest unit.ha_ping_server: an ha-ping server on 127.0.0.1 does not trust its clients (item 6 of
# issue 31). No RDMA needed: HA_NCCL_IB_HCA matches no device, so sessions have no rails, and the
# handshake, the limits and the deadlines are what is tested. One server (token, --serve (no bound
# on the wait between clients: a loaded machine may take seconds to start the next one),
# --timeout 4, --max-size 1M) and, one after another:
#   a wrong token, no token          -> "authentication failed" (exit 2), not counted
#   an HTTP request                  -> dropped, not counted
#   a silent connection              -> dropped after the 4 s handshake step, while a real client
#                                       waits behind it ...
#   ... that client asks for 2M      -> refused: above --max-size (exit 2), client 1
#   half a frame header, then silence -> dropped after the handshake step
#   a proved Hello asking for ~49 days, then silence (ha_ping_peer.py)
#                                    -> the ack grants 4000 ms, the server ends the session by
#                                       itself 4 s later, client 2 (its rail reports the timeout)
#   a real client with --timeout 3600 -> served with the timeout capped at 4 s, client 3
# usage: test_ha_ping_server.sh HA_PING WORKDIR
set -u
HA_PING=$1 WORK=$2
HERE=$(cd "$(dirname "$0")" && pwd)
PEER=$HERE/ha_ping_peer.py
rm -rf "$WORK" && mkdir -p "$WORK" || exit 1
export HA_NCCL_IB_HCA='=no-such-device'
unset HA_PING_TOKEN
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
ok() { echo "ok   $*"; }

# --help says what a server without a token means.
"$HA_PING" --help | grep -q "ANYONE WHO CAN REACH THE SERVER'S PORT CAN USE IT" && ok "--help warns about no token" ||
  fail "--help does not warn about running without a token"

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
HA_PING_TOKEN=s3cret "$HA_PING" --bind 127.0.0.1 --port "$port" --serve --timeout 4 --max-size 1M \
  --json-file "$WORK/server.json" >"$WORK/server.txt" 2>"$WORK/server.log" &
server=$!
for _ in $(seq 100); do grep -q "listening on" "$WORK/server.log" 2>/dev/null && break; sleep 0.05; done

# client NAME EXPECTED_EXIT [ha-ping args...]: a real client against the server; its JSON report in $WORK/NAME.json
client() {
  local name=$1 want=$2 rc=0
  shift 2
  "$HA_PING" --json-file "$WORK/$name.json" "$@" "127.0.0.1:$port" >"$WORK/$name.txt" 2>"$WORK/$name.log" || rc=$?
  [[ $rc == "$want" ]] && ok "$name: exit $rc" || { fail "$name: exit $rc, expected $want"; cat "$WORK/$name.log"; }
}
# json_has FILE PYTHON-EXPR...: each true for r = the file's last JSON line
json_has() {
  local file=$1
  shift
  python3 - "$file" "$@" <<'PY' || fail "$(basename "$file"): report checks"
import json, os, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
bad = [e for e in sys.argv[2:] if not eval(e, {"r": r})]
for e in bad:
    print("  report check failed:", e, "in", r)
if not bad:
    print(f"ok   {os.path.basename(sys.argv[1])}: " + "; ".join(sys.argv[2:]))
sys.exit(1 if bad else 0)
PY
}

client wrong-token 2 --token wrong
json_has "$WORK/wrong-token.json" 'r["error"] == f"refused by 127.0.0.1:'"$port"': authentication failed"'
client no-token 2
json_has "$WORK/no-token.json" 'r["error"].endswith(": authentication failed")'
echo "GET / HTTP/1.0" >"/dev/tcp/127.0.0.1/$port" || true

python3 "$PEER" silent "$port" >"$WORK/silent.out" &
silent=$!
sleep 0.5
start=$SECONDS
HA_PING_TOKEN=s3cret client huge-size 2 --sizes 8,2M
waited=$((SECONDS - start))
json_has "$WORK/huge-size.json" 'r["error"].endswith("size 2 MiB is above the server'"'"'s --max-size 1 MiB")'
wait $silent
json_has "$WORK/silent.out" '3 <= r["closed_after_s"] <= 8'
((waited <= 10)) && ok "huge-size: served ${waited} s after it connected behind a silent client" ||
  fail "huge-size: waited ${waited} s behind a silent client"

python3 "$PEER" partial "$port" >"$WORK/partial.out"
json_has "$WORK/partial.out" '3 <= r["closed_after_s"] <= 8'
HA_PING_TOKEN=s3cret python3 "$PEER" stall s3cret "$port" >"$WORK/stall.out"
json_has "$WORK/stall.out" 'r["answer"] == "hello ack"' 'r["ack_timeout_ms"] == 4000' '3 <= r["closed_after_s"] <= 10'
HA_PING_TOKEN=s3cret client capped 1 --timeout 3600
json_has "$WORK/capped.json" '"error" not in r' 'r["settings"]["timeout_s"] == 4'
grep -q "the server caps --timeout at 4 s" "$WORK/capped.log" && ok "capped: the client says so" ||
  fail "capped: no note of the cap in the client's log"

# The server writes a client's line after the client left: wait for the third, then stop it.
for _ in $(seq 300); do (($(grep -c . "$WORK/server.json" 2>/dev/null || true) >= 3)) && break; sleep 0.1; done
kill $server
wait $server
python3 - "$WORK/server.json" <<'PY' || fail "server: JSON lines"
import json, sys
lines = [json.loads(x) for x in open(sys.argv[1]) if x.strip()]
assert [x["client"] for x in lines] == [1, 2, 3], [x.get("client") for x in lines]
assert lines[0]["error"].startswith("refused the client's request: size 2 MiB is above"), lines[0]
assert lines[0]["settings"]["sizes"] == [8, 2 << 20], lines[0]["settings"]
r = lines[1]["rails"]
assert lines[1]["settings"]["timeout_s"] == 4 and len(r) == 1 and r[0]["status"] == "error", lines[1]
assert "the peer sent no control message within 4000 ms" in r[0]["reason"], r[0]
assert "error" not in lines[2] and lines[2]["settings"]["timeout_s"] == 4, lines[2]
print("ok   server: three clients reported (refused, stalled, capped)")
PY
log=$WORK/server.log
[[ $(grep -c "dropped a connection from 127.0.0.1: authentication failed" "$log") == 2 ]] &&
  ok "server: two connections dropped for a wrong proof" || fail "server: wrong proofs not dropped as such"
[[ $(grep -c "dropped a connection from 127.0.0.1: no valid hello within 4000 ms" "$log") == 3 ]] &&
  ok "server: the HTTP request, the silent and the half-header connections dropped" ||
  fail "server: strangers not dropped as expected"
grep -q "asked for --timeout 3600 s: capped at this server's 4 s" "$log" && ok "server: logs the cap" ||
  fail "server: no cap logged"
if ((failures)); then
  echo "--- server log"; cat "$log"
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"
