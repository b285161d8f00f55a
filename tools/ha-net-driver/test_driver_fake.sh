#!/usr/bin/env bash
# ctest unit.driver_fake: ha-net-driver against the loopback fake plugins (v10 and v8), both
# ranks on 127.0.0.1. Checks exit codes and the JSON reports of every scenario (also --one-way,
# --min-seconds, the timeline, plugin-error timing, --outlive-peer and the management token).
# usage: test_driver_fake.sh DRIVER LIBFAKE_V10 LIBFAKE_V8 WORKDIR
set -u
DRIVER=$1 FAKE10=$2 FAKE8=$3 WORK=$4
rm -rf "$WORK" && mkdir -p "$WORK" || exit 1
. "$(dirname "$0")/test_pair.sh"

# --version: "ha-net-driver <version>" on stdout, exit 0, no other option needed.
version_out=$("$DRIVER" --version 2>&1)
rc=$?
if [[ $rc -ne 0 || ! $version_out =~ ^ha-net-driver\ [0-9]+\.[0-9]+\.[0-9]+$ ]]; then
  echo "FAIL version: exit $rc, output '$version_out'"; failures=$((failures + 1))
else
  echo "ok   version ($version_out)"
fi

SIZES=0,1,8,4K,64K,1M,4M

RANK0_ENV=FAKE_RETRY_EVERY=5 RANK1_ENV=FAKE_RETRY_EVERY=7 \
  run_pair v10-full 0 0 "$FAKE10" --sizes $SIZES --group 4 --inflight 8 --messages 140 --optional-recv \
  --pingpong --iters 20 --bw --bw-messages 16 --comms 16 --timeout 30
check_json v10-full 'r["ok"] and r["api_version"] == 10' \
  'r["integrity"]["messages_received"] == 140 and r["integrity"]["mismatches"] == 0' \
  'r["integrity"]["size_errors"] == 0 and r["integrity"]["overruns"] == 0' \
  'r["integrity"]["isend_retries"] > 0 and r["integrity"]["flush"] == "completed"' \
  'len(r["latency"]) == 7 and all(l["median_us"] > 0 and l["mismatches"] == 0 for l in r["latency"])' \
  'len(r["bandwidth"]) == 7 and all(b["mib_s"] > 0 for b in r["bandwidth"] if b["size"] > 0)' \
  'r["comms_test"]["n"] == 16 and r["comms_test"]["fds_returned"] and r["comms_test"]["messages_ok"] == 16' \
  'r["resources"]["after_close"]["fds"] == r["resources"]["before_init"]["fds"]' \
  'r["calls"]["isend"]["count"] > 0 and r["calls"]["irecvConsumed"]["count"] > 0' \
  'r["properties"]["maxRecvs"] == 8 and r["peer_ok"]'

run_pair v8-full 0 0 "$FAKE8" --sizes $SIZES --group 4 --inflight 8 --messages 70 --test-order all \
  --pingpong --iters 10 --lat-ahead 1 --bw --bw-messages 16 --comms 4 --timeout 30
check_json v8-full 'r["ok"] and r["api_version"] == 8 and r["exported_symbols"] == ["ncclNetPlugin_v8"]' \
  'len(r["latency"]) == 7 and all(l["median_us"] > 0 and l["mismatches"] == 0 for l in r["latency"])' \
  'r["integrity"]["messages_received"] == 70 and r["integrity"]["mismatches"] == 0' \
  'r["properties"]["regIsGlobal"] == 0 and r["properties"]["maxP2pBytes"] is None' \
  'r["comms_test"]["fds_returned"] and "irecvConsumed" not in r["calls"]'

RANK1_ENV=FAKE_CORRUPT=1 run_pair corrupt 1 1 "$FAKE10" --sizes $SIZES --group 4 --messages 70 --timeout 30
check_json corrupt 'not r["ok"] and r["exit_code"] == 1' \
  '(r["rank"] == 1) == (r["integrity"]["mismatches"] == 1 and r["integrity"]["mismatched_bytes"] == 1)' \
  'r["rank"] == 1 or r["peer_ok"] is False'
# --verify sampled still catches a corrupted byte in a window (the middle one: FAKE_CORRUPT flips
# byte size/2 of the 3rd non-empty message), with the message's own pattern.
RANK1_ENV=FAKE_CORRUPT=1 run_pair corrupt-sampled 1 1 "$FAKE10" --sizes 64K --messages 10 --verify sampled --timeout 30
check_json corrupt-sampled '(r["rank"] == 1) == (r["integrity"]["mismatches"] == 1 and r["integrity"]["mismatched_bytes"] == 1)'

run_pair api-missing 3 3 "$FAKE10" --api 9 --messages 10 --timeout 30
check_json api-missing 'r["exit_code"] == 3 and "ncclNetPlugin_v9" in r["errors"][0]'

# --fuse: the run on the virtual device the plugin makes of two of its devices (the fake fuses as
# net_ib reports: vProps the members, speed their sum); a refusal ends the run with exit 3.
RANK0_ENV=FAKE_DEVICES=2 RANK1_ENV=FAKE_DEVICES=2 \
  run_pair fuse 0 0 "$FAKE10" --fuse 0,1 --messages 20 --sizes 0,4K,64K --timeout 30
check_json fuse 'r["ok"] and r["dev"] == 2 and r["properties"]["name"] == "fake0+fake1"' \
  'r["properties"]["speed"] == 20000 and r["properties"]["vProps"]["devs"] == [0, 1]' \
  'r["calls"]["makeVDevice"]["count"] == 1 and r["integrity"]["messages_received"] == 20' \
  'len([c for c in r["checks"] if c["name"].startswith("virtual device") and c["ok"]]) >= 3'
RANK0_ENV="FAKE_DEVICES=2 FAKE_VDEVICE_REFUSE=1" RANK1_ENV="FAKE_DEVICES=2 FAKE_VDEVICE_REFUSE=1" \
  run_pair fuse-refused 3 3 "$FAKE10" --fuse 0,1 --messages 10 --timeout 30
check_json fuse-refused 'r["exit_code"] == 3 and "makeVDevice(0,1)" in r["errors"][0]'

# A step handle stays in flight across a "try again": a plugin may start a profiler event under
# it then (NCCL's step is open until its request is done), and the stand-in takes it.
RANK0_ENV="FAKE_RETRY_EVERY=3 FAKE_PROFILE_RETRY=1" RANK1_ENV="FAKE_RETRY_EVERY=2 FAKE_PROFILE_RETRY=1" \
  run_pair profile-retry 0 0 "$FAKE10" --messages 40 --sizes 0,8,4K --timeout 30
check_json profile-retry 'r["ok"] and r["integrity"]["isend_retries"] > 0 and r["integrity"]["irecv_retries"] > 0' \
  'r["profiler"]["other_plugins"] > 0 and r["profiler"]["errors"] == []'

# --one-way + --min-seconds: rank 1 streams to rank 0 for at least 1.5 s, counts agreed over mgmt.
RANK1_ENV=FAKE_RETRY_EVERY=3 RANK0_ARGS="--phase-file $WORK/one-way-timed/phase0" \
  run_pair one-way-timed 0 0 "$FAKE10" --one-way --min-seconds 1.5 --messages 20 --sizes 0,1,4K,64K,1M \
  --group 2 --inflight 4 --timeout 30
check_json one-way-timed 'r["ok"] and "one_way=1 min_seconds=1.5" in r["params"]' \
  'r["timeline"]["bin_ms"] == 10 and (r["rank"] == 0 or r["timeline"]["duration_ms"] >= 1500)' \
  'r["phase_start_unix_ms"] == r["timeline"]["start_unix_ms"] <= r["exit_unix_ms"]' \
  'r["error_unix_ms"] is None and r["plugin_error"] is None and r["peer_abort"] is None' \
  'abs(r["clock"]["peer_offset_ms"]) < 100 and r["clock"]["rtt_ms"] >= 0' \
  'len(r["timeline"]["recv_msgs"]) == len(r["timeline"]["send_bytes"]) >= 150' \
  'sum(r["timeline"]["recv_msgs"]) == r["timeline"]["recv_messages"] == r["integrity"]["messages_received"]' \
  'sum(r["timeline"]["send_msgs"]) == r["timeline"]["send_messages"] == r["integrity"]["messages_sent"]' \
  'sum(r["timeline"]["recv_bytes"]) == r["integrity"]["bytes_received"]' \
  'r["integrity"]["mismatches"] == 0 and r["integrity"]["size_errors"] == 0'
# The sender (rank 1) ran >= 1.5 s on its own clock; the receiver's phase may have started later
# (a loaded machine), so it only ends after the sender's 1.5 s: same host, same wall clock.
check_pair one-way-timed 'a["integrity"]["messages_sent"] == 0 and b["integrity"]["messages_received"] == 0' \
  'a["timeline"]["start_unix_ms"] + a["timeline"]["duration_ms"] + 1 >= b["timeline"]["start_unix_ms"] + 1500' \
  'a["integrity"]["messages_received"] == b["integrity"]["messages_sent"] >= 20' \
  'a["integrity"]["bytes_received"] == b["integrity"]["bytes_sent"]' \
  'a["timeline"]["max_gap_ms"] > 0 and b["timeline"]["send_max_gap_ms"] > 0 and b["timeline"]["first_recv_ms"] is None' \
  'a["integrity"]["flush"] == "completed" and b["integrity"]["flush"] == "not run"' \
  'abs(a["clock"]["peer_offset_ms"] + b["clock"]["peer_offset_ms"]) < 0.01'
grep -q '^exit-0 ' "$WORK/one-way-timed/phase0" 2>/dev/null || { echo "FAIL one-way-timed: phase file"; failures=$((failures + 1)); }

# --stop-file (rank 1, the sender): the stream goes on past --min-seconds until the file exists
# (a script touches it 2 s after the phase started), then ends at the next limit, both ranks agreeing.
mkdir -p "$WORK/stop-file"
stop=$WORK/stop-file/stop
( for _ in $(seq 300); do grep -q '^integrity ' "$WORK/stop-file/phase1" 2>/dev/null && break; sleep 0.1; done
  sleep 2; touch "$stop" ) &
RANK1_ARGS="--stop-file $stop --phase-file $WORK/stop-file/phase1" run_pair stop-file 0 0 "$FAKE10" --one-way \
  --min-seconds 0.3 --messages 20 --sizes 0,4K,64K --group 2 --inflight 4 --timeout 30
wait
stop_ms=$(($(stat -c %.3Y "$stop" 2>/dev/null | tr -d .) + 0))
# The stream ends after the file appeared: its mtime is a bound only to 50 ms, since touch creates
# the file first and sets the time after (a loaded CI host: the stream ended 1.2 ms before the mtime).
check_json stop-file 'r["ok"] and (r["rank"] == 0 or r["timeline"]["duration_ms"] >= 1900)' \
  "r['rank'] == 0 or r['timeline']['start_unix_ms'] + r['timeline']['duration_ms'] + 50 >= $stop_ms"
check_pair stop-file 'a["integrity"]["messages_received"] == b["integrity"]["messages_sent"] >= 20' \
  'a["integrity"]["mismatches"] == 0'
# --stop-file without --min-seconds: a usage error (exit 2).
"$DRIVER" --plugin "$FAKE10" --rank 1 --peer 127.0.0.1:1 --one-way --messages 20 --stop-file "$stop" 2>"$WORK/stop-file/usage.log"
rc=$?
if [[ $rc -eq 2 ]] && grep -q -- '--stop-file needs --min-seconds' "$WORK/stop-file/usage.log"; then
  echo "ok   stop-file-usage (exit 2)"
else
  echo "FAIL stop-file-usage: exit $rc: $(cat "$WORK/stop-file/usage.log")"; failures=$((failures + 1))
fi

# --idle (per rank): rank 1, the sender, makes no plugin call for 1 s from 0.5 s; rank 0, the
# receiver, twice for 0.3 s. The windows are in the reports; no completion inside them (the fake
# plugin moves data only inside test()), and the stream still completes, every message once.
# A window starts at the first polling turn at or after its AT_MS: how late that turn comes
# depends on the machine's load (this test shares the cores with VM tests), so the bound on the
# lateness is loose (2 s); the order and the durations are what is checked.
RANK0_ARGS="--idle 1800:300,2300:300" RANK1_ARGS="--idle 500:1000" run_pair idle 0 0 "$FAKE10" --one-way \
  --min-seconds 3 --messages 20 --sizes 0,4K,64K --group 2 --inflight 4 --timeout 30
check_json idle 'r["ok"] and "idle" not in r["params"]' \
  'len(r["idle_windows"]) == (2 if r["rank"] == 0 else 1)' \
  'all(w["end_unix_ms"] - w["start_unix_ms"] >= w["duration_ms"] and w["start_ms"] >= w["at_ms"] for w in r["idle_windows"])' \
  'all(r["phase_start_unix_ms"] + w["at_ms"] <= w["start_unix_ms"] <= r["phase_start_unix_ms"] + w["at_ms"] + 2000
       for w in r["idle_windows"])' \
  '[(w["at_ms"], w["duration_ms"]) for w in r["idle_windows"]] == ([(1800, 300), (2300, 300)] if r["rank"] == 0 else [(500, 1000)])' \
  'all(not sum(r["timeline"]["recv_msgs" if r["rank"] == 0 else "send_msgs"][(w["start_unix_ms"] - r["timeline"]["start_unix_ms"]) // 10 + 1:
                                                                               (w["end_unix_ms"] - r["timeline"]["start_unix_ms"]) // 10])
       for w in r["idle_windows"])'
check_pair idle 'a["integrity"]["messages_received"] == b["integrity"]["messages_sent"] >= 20' \
  'a["integrity"]["bytes_received"] == b["integrity"]["bytes_sent"] and a["integrity"]["mismatches"] == 0' \
  'a["timeline"]["max_gap_ms"] >= 900 and b["timeline"]["send_max_gap_ms"] >= 900'
# --idle windows must not overlap and must end within --timeout (usage errors, exit 2).
for bad in "--idle 100:200,250:10" "--idle 100:200 --idle 0:150" "--idle 1000:2000 --timeout 3" "--idle 5" \
  "--idle 100:0" "--idle 100:200 --messages 0"; do
  "$DRIVER" --plugin "$FAKE10" --rank 0 $bad >/dev/null 2>"$WORK/idle-usage.log"
  rc=$?
  if [ "$rc" -ne 2 ]; then echo "FAIL idle-usage: '$bad' exit $rc (expected 2)"; failures=$((failures + 1)); fi
done
echo "ok   idle-usage"

# --min-seconds in both directions with grouped receives, sampled verification.
run_pair timed-both 0 0 "$FAKE10" --min-seconds 1 --messages 10 --sizes 8,64K,1M --group 4 --inflight 8 --timeout 30 \
  --verify sampled
check_pair timed-both 'a["ok"] and b["ok"] and a["timeline"]["duration_ms"] >= 1000 and "verify=sampled" in a["params"]' \
  'a["integrity"]["messages_received"] == b["integrity"]["messages_sent"] >= 10' \
  'b["integrity"]["messages_received"] == a["integrity"]["messages_sent"] >= 10'

# --bw-bytes: the same volume for every size (at least --inflight messages).
run_pair bw-bytes 0 0 "$FAKE10" --messages 0 --bw --bw-bytes 2M --sizes 64K,1M,4M --inflight 4 --timeout 30
check_json bw-bytes '[b["messages"] for b in r["bandwidth"]] == [32, 4, 4] and "bw_bytes=2097152" in r["params"]'

# The ranks must agree on --min-seconds (and --one-way).
RANK0_ARGS="--min-seconds 1" RANK1_ARGS="--min-seconds 2" run_pair params-differ 2 2 "$FAKE10" --messages 10 --timeout 30
RANK0_ARGS="--one-way" run_pair one-way-differs 2 2 "$FAKE10" --messages 10 --timeout 30

# A plugin error mid-stream: rank 0's test() fails after 40 receives -> exit 3 with the call, the
# ncclResult_t and its time. Rank 1 either sees the abort first (exit 5) or its own send error
# when rank 0's process is gone (exit 3): a race.
RANK0_ENV=FAKE_FAIL_AFTER=40 run_pair fail-timing 3 "3|5" "$FAKE10" --one-way --min-seconds 5 --messages 10 \
  --sizes 64K --timeout 30
check_pair fail-timing 'not a["ok"] and a["timeline"]["duration_ms"] < 5000' \
  'a["plugin_error"]["code"] == 2 and a["plugin_error"]["result"] == "ncclSystemError"' \
  'a["plugin_error"]["call"] == "test(irecv)" and a["plugin_error"]["phase"] == "integrity"' \
  'a["phase_start_unix_ms"] <= a["error_unix_ms"] <= a["exit_unix_ms"]' \
  'a["integrity"]["messages_received"] == a["timeline"]["recv_messages"] == 40' \
  'b["peer_abort"] is None' \
  '((b["exit_code"] == 5 and b["plugin_error"] is None and "peer aborted" in b["errors"][0]) or
    (b["exit_code"] == 3 and b["plugin_error"]["code"] == 2))'
# NCCL_DEBUG_TIMESTAMP_LEVELS / _FORMAT: the plugin's WARN line starts with the wall clock (here
# "<unix s>.<ms>|"), taken when it was logged: after the phase started, before the report.
RANK0_ENV="FAKE_FAIL_AFTER=40 NCCL_DEBUG_TIMESTAMP_LEVELS=WARN NCCL_DEBUG_TIMESTAMP_FORMAT=%s.%3f|" \
  run_pair stamped 3 "3|5" "$FAKE10" --one-way --min-seconds 5 --messages 10 --sizes 64K --timeout 30
stamp=$(grep -m1 -oE '^[0-9]{10}\.[0-9]{3}\|[^ ]+ \[0\] [^ ]+ NCCL WARN' "$WORK/stamped/rank0.log" | cut -d'|' -f1)
if [[ -z $stamp ]]; then
  echo "FAIL stamped: no WARN line with a '<s>.<ms>|' timestamp in rank 0's log"; failures=$((failures + 1))
else
  check_pair stamped "a[\"phase_start_unix_ms\"] <= round($stamp * 1000) <= a[\"exit_unix_ms\"]"
fi
# --comms-hold: the pairs stay open (no plugin call) for the hold, then close as usual.
run_pair comms-hold 0 0 "$FAKE10" --messages 0 --comms 4 --comms-hold 1.5 --timeout 30
check_pair comms-hold 'a["comms_test"]["held_s"] == 1.5 and b["comms_test"]["held_s"] == 1.5' \
  'a["comms_test"]["messages_ok"] == 4 and a["comms_test"]["fds_returned"]' \
  '"comms_hold=1.5" in a["params"]'
# ... and with --wait-file it ends early, once the file exists (here: from the start).
touch "$WORK/hold-end"
run_pair comms-hold-end 0 0 "$FAKE10" --messages 0 --comms 2 --comms-hold 60 --wait-file "$WORK/hold-end" --timeout 30
check_pair comms-hold-end 'a["comms_test"]["held_s"] < 5 and b["comms_test"]["held_s"] < 5' \
  'a["comms_test"]["messages_ok"] == 2'
# --outlive-peer: rank 1 keeps driving its plugin after the abort, until its own error (exit 3) ...
RANK0_ENV=FAKE_FAIL_AFTER=40 RANK1_ARGS="--outlive-peer 10" run_pair outlive 3 3 "$FAKE10" --one-way \
  --min-seconds 5 --messages 10 --sizes 64K --timeout 30
check_pair outlive 'b["plugin_error"]["code"] == 2 and b["plugin_error"]["call"] == "test(isend)"' \
  'b["peer_abort"] is None or b["peer_abort"]["unix_ms"] <= b["error_unix_ms"] <= b["exit_unix_ms"]' \
  'a["plugin_error"]["code"] == 2'
# ... or, when its plugin never reports one (every isend says "try again"), for the grace period.
RANK0_ENV=FAKE_FAIL_AFTER=0 RANK1_ENV=FAKE_RETRY_EVERY=1 RANK1_ARGS="--outlive-peer 1" run_pair outlive-expires \
  3 5 "$FAKE10" --one-way --min-seconds 5 --messages 10 --sizes 64K --timeout 30
check_pair outlive-expires 'a["plugin_error"]["code"] == 2 and a["integrity"]["messages_received"] == 0' \
  'b["plugin_error"] is None and "peer aborted" in b["peer_abort"]["reason"]' \
  '"no plugin error here within --outlive-peer 1 s" in b["errors"][0]' \
  'b["exit_unix_ms"] - b["peer_abort"]["unix_ms"] >= 1000'

# --comms-rounds: every pair moves R messages each way, each round's bytes its own.
run_pair comms-rounds 0 0 "$FAKE10" --messages 0 --comms 3 --comms-rounds 5 --timeout 30
check_pair comms-rounds 'a["comms_test"]["messages_ok"] == 15 and b["comms_test"]["messages_ok"] == 15' \
  '"comms_rounds=5" in a["params"]'

# --churn: 12 extra pairs opened and closed one after another during a 2 s stream (both ways),
# with every 2nd isend/irecv NULL on rank 1 (so every pair retries one); --check-resources: fds and threads after the stream == after connect.
RANK1_ENV=FAKE_RETRY_EVERY=2 run_pair churn 0 0 "$FAKE10" --min-seconds 2 --messages 10 --sizes 0,8,4K,64K \
  --churn 12 --check-resources --timeout 30
check_json churn 'r["ok"] and "churn=12" in r["params"] and r["churn"]["n"] == 12' \
  'r["churn"]["opened"] == r["churn"]["closed"] == r["churn"]["messages_ok"] == 12 and r["churn"]["bad_messages"] == 0' \
  'abs(r["churn"]["spacing_ms"] - 2000 / 12) < 1 and r["churn"]["dev"] == 0' \
  'r["ring"]["send_comm"].startswith("0x") and r["ring"]["send_comm"] != r["ring"]["recv_comm"]' \
  'r["resources"]["after_connect"]["fds"] == r["resources"]["stream_end"]["fds"] > r["resources"]["before_init"]["fds"]' \
  'r["resources"]["stream_end"]["threads"] == r["resources"]["after_connect"]["threads"]' \
  '[c["ok"] for c in r["checks"] if c["name"].startswith("fds after the stream")] == [True]' \
  '[c["ok"] for c in r["checks"] if c["name"].startswith("churn:")] == [True]'
check_pair churn 'a["integrity"]["messages_received"] == b["integrity"]["messages_sent"] >= 10' \
  'b["integrity"]["messages_received"] == a["integrity"]["messages_sent"] >= 10' \
  'a["churn"]["isend_retries"] + a["churn"]["irecv_retries"] == 0 and b["churn"]["isend_retries"] + b["churn"]["irecv_retries"] >= 12'
# Without --min-seconds the pairs run back to back (--one-way: the idle direction does not matter).
run_pair churn-burst 0 0 "$FAKE10" --one-way --messages 200 --sizes 4K --churn 5 --timeout 30
check_json churn-burst 'r["churn"]["closed"] == r["churn"]["messages_ok"] == 5 and r["churn"]["spacing_ms"] == 0' \
  'r["resources"]["after_connect"] is None and r["resources"]["stream_end"] is None'
# A leak is found: every churn recv comm keeps its socket open on rank 0 (exit 1 there; rank 1 gets
# rank 0's failure in the result exchange).
RANK0_ENV=FAKE_LEAK_CLOSE=1 run_pair churn-leak 1 1 "$FAKE10" --min-seconds 1 --messages 10 --sizes 64K --churn 4 \
  --check-resources --timeout 12
check_pair churn-leak 'a["resources"]["stream_end"]["fds"] == a["resources"]["after_connect"]["fds"] + 4' \
  '3900 < a["resources"]["stream_settle_ms"] < 6000' \
  '[c["ok"] for c in a["checks"] if c["name"].startswith("fds after the stream")] == [False]' \
  '[c["ok"] for c in b["checks"] if c["name"].startswith("fds after the stream")] == [True]'
# --churn-retry: every 3rd connection of rank 1 fails (connect returns ncclSystemError): the pair
# is abandoned on both ranks (rank 0 learns it over mgmt, or its own connect to rank 1's closed
# listener fails first) and opened again; every pair still completes, fds back. Without --churn-retry the same run ends with exit 3.
RANK1_ENV=FAKE_CONNECT_FAIL_EVERY=3 run_pair churn-retry 0 0 "$FAKE10" --min-seconds 2 --messages 10 --sizes 4K \
  --churn 6 --churn-retry --check-resources --timeout 30
check_pair churn-retry 'a["churn"]["closed"] == b["churn"]["closed"] == a["churn"]["messages_ok"] == b["churn"]["messages_ok"] == 6' \
  'b["churn"]["connect_failures"] >= 2 and a["churn"]["connect_failures"] == b["churn"]["connect_failures"]' \
  '"connect (churn) returned ncclSystemError" in b["churn"]["failure_lines"][0]' \
  'all("connect (churn) returned ncclSystemError" in l for l in a["churn"]["failure_lines"])' \
  'a["ok"] and b["ok"] and b["calls"]["connect"]["errors"] >= b["churn"]["connect_failures"]' \
  'all(r["resources"]["stream_end"]["fds"] == r["resources"]["after_connect"]["fds"] for r in (a, b))'
RANK1_ENV=FAKE_CONNECT_FAIL_EVERY=3 run_pair churn-noretry "5|3" 3 "$FAKE10" --min-seconds 2 --messages 10 --sizes 4K \
  --churn 6 --timeout 30
check_pair churn-noretry 'b["plugin_error"]["call"] == "connect (churn)" and b["churn"]["connect_failures"] == 0'
# The ranks must agree on --churn; --churn-dev must name a device.
RANK0_ARGS="--churn 3" run_pair churn-differs 2 2 "$FAKE10" --messages 10 --timeout 30
RANK0_ARGS="--churn-retry" run_pair churn-retry-differs 2 2 "$FAKE10" --messages 10 --churn 3 --timeout 30
run_pair churn-dev-range 2 2 "$FAKE10" --messages 10 --churn 2 --churn-dev 7 --timeout 30
for bad in "--churn 3 --messages 0" "--churn -1" "--churn x" "--churn-dev 1 --messages 5" "--check-resources --messages 0" \
  "--churn 2 --fault oversize" "--check-resources --fault bad-dev" "--churn-retry --messages 5"; do
  "$DRIVER" --plugin "$FAKE10" --rank 0 $bad >/dev/null 2>"$WORK/churn-usage.log"
  rc=$?
  if [ "$rc" -ne 2 ]; then echo "FAIL churn-usage: '$bad' exit $rc (expected 2)"; failures=$((failures + 1)); fi
done
echo "ok   churn-usage"

# The management port's token (issue 31, item 6): the same token on both ranks (rank 0's from the
# environment, rank 1's from --token) connects as usual; different tokens: rank 1 is refused at once
# (exit 2), rank 0 drops it and waits on for the real peer until its --timeout (exit 4).
RANK0_ENV=HA_NET_DRIVER_TOKEN=pair-secret RANK1_ARGS="--token pair-secret" run_pair token 0 0 "$FAKE10" \
  --messages 20 --timeout 30
RANK0_ARGS="--token pair-secret" RANK1_ARGS="--token other" run_pair token-differs 4 2 "$FAKE10" --messages 20 --timeout 3
check_pair token-differs '"authentication failed: rank 0 refused this rank" in b["errors"][0]' \
  '"timeout after 3 s waiting for rank 1" in a["errors"][0] and "1 wrong token" in a["errors"][0]'

if [ "$failures" -ne 0 ]; then
  echo "unit.driver_fake: $failures failure(s); logs in $WORK"
  exit 1
fi
echo "unit.driver_fake: all scenarios passed"
