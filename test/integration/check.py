#!/usr/bin/env python3
"""Checks what a VM integration test recorded under <logdir>/{a,b}/out/.

Every check prints what it verified; the first failed expectation exits 1 with the reason.
"""
import json
import sys
from pathlib import Path


class Run:
    def __init__(self, logdir: Path):
        self.dir = logdir

    def out(self, role, name):
        return self.dir / role / "out" / name

    def text(self, role, name):
        p = self.out(role, name)
        if not p.exists():
            fail(f"{p} is missing")
        return p.read_text().strip()

    def rc(self, role, name):
        return int(self.text(role, f"{name}.rc"))

    def report(self, role, name):
        return json.loads(self.text(role, f"{name}.json"))


def fail(msg):
    print(f"check: FAIL: {msg}")
    sys.exit(1)


def expect(cond, msg):
    if not cond:
        fail(msg)
    print(f"check: ok: {msg}")


def why_exited(run, role, name):
    """What a driver said when it ended: its report's errors and the peer's abort, if recorded."""
    try:
        r = run.report(role, name)
    except (SystemExit, ValueError):
        return "no report"
    said = list(r.get("errors") or [])[:3]
    if r.get("peer_abort"):
        said.append(f"the peer aborted: {r['peer_abort'].get('reason')}")
    return "; ".join(said) or "no error recorded"


def expect_exit(run, name, want=0, roles=("a", "b")):
    """Every rank's driver exited with `want`; when one did not, the FAIL line carries what each
    rank said (its errors and the peer's abort reason), so a CI log alone shows the cause."""
    rcs = {role: run.rc(role, name) for role in roles}
    if any(rc != want for rc in rcs.values()):
        fail(f"{name}: " + " | ".join(f"rank {'ab'.index(role)} exit {rc} (expected {want}): {why_exited(run, role, name)}"
                                      for role, rc in rcs.items()))
    for role, rc in rcs.items():
        print(f"check: ok: {name}: rank {'ab'.index(role)} exit {rc} (expected {want})")


def expect_each(test, cases):
    """Runs every (name, fn) case, each judged on its own (a failed expectation ends only that
    case), then fails naming every case that failed."""
    failed = []
    for name, fn in cases:
        print(f"check: info: ---- {name}")
        try:
            fn()
        except SystemExit as e:  # fail(): its FAIL line is printed; go on with the next case
            if e.code not in (None, 0):
                failed.append(name)
        except (KeyError, TypeError, IndexError, ValueError) as e:  # e.g. a watchdog's minimal report
            print(f"check: FAIL: {name}: the recorded files lack what the check needs: {type(e).__name__}: {e}")
            failed.append(name)
    if failed:
        fail(f"{test}: {len(failed)} of {len(cases)} case(s) failed: {', '.join(failed)}")


def rail(report, index):
    rails = report["rails"]
    expect(len(rails) > index, f"{report['role']} reports rail {index}")
    return rails[index]


def expect_traffic(r, sizes):
    """A healthy rail: latency and bandwidth measured (real traffic) at every size."""
    got = [x["size"] for x in r["results"]]
    expect(got == sizes, f"rail {r['index']} ({r['local']}) measured sizes {sizes}")
    for x in r["results"]:
        lat = x.get("latency_us", {})
        expect(lat.get("samples", 0) > 0 and 0 < lat["min"] <= lat["median"] <= lat["p99"],
               f"rail {r['index']} size {x['size']}: latency min/median/p99 "
               f"{lat.get('min')}/{lat.get('median')}/{lat.get('p99')} us")
        expect(x.get("bw_mib_s", 0) > 0, f"rail {r['index']} size {x['size']}: bandwidth {x.get('bw_mib_s')} MiB/s")


def ha_ping_rails(run):
    sizes = [8, 65536, 1048576]
    expect(run.rc("a", "healthy") == 0, "client exit 0 with both rails healthy")
    expect(run.rc("b", "healthy") == 0, "server exit 0 with both rails healthy")
    for role in ("a", "b"):
        rep = run.report(role, "healthy")
        expect(len(rep["rails"]) == 2, f"{rep['role']} checked 2 rails")
        for i in (0, 1):
            r = rail(rep, i)
            expect(r["status"] == "healthy", f"{rep['role']} rail {i} {r['local']} healthy ({r['reason']})")
            expect(r["local"] == f"rxe{i}:1", f"{rep['role']} rail {i} is rxe{i}:1")
            if role == "a":
                expect_traffic(r, sizes)
    rep = run.report("a", "degraded")
    expect(run.rc("a", "degraded") == 1, "client exit 1 when a rail is below --min-bw")
    r = rail(rep, 0)
    expect(r["status"] == "degraded" and "min-bw" in r["reason"], f"rail 0 degraded: {r['reason']}")
    expect(len(rep["rails"]) == 1, "--rails 0 checked only rail 0")

    expect_each("ha-ping-rails", [
        ("report fields", lambda: ha_ping_report_fields(run)),
        ("min-bw percent, tx-depth, duration, Gb/s", lambda: ha_ping_percent(run)),
        ("-d / -i / -x select the device, port and GID index", lambda: ha_ping_selected(run)),
        ("qos", lambda: ha_ping_qos(run)),
        ("server serves clients one after another", lambda: ha_ping_serve_clients(run)),
        ("list", lambda: ha_ping_list(run)),
    ])


def ha_ping_report_fields(run):
    for role in ("a", "b"):
        rep = run.report(role, "healthy")
        expect(rep.get("version") and rep.get("host") == role, f"{role}: version {rep.get('version')}, host {rep.get('host')}")
        t = rep["time"]
        expect(t["iso"].endswith("Z") and "T" in t["iso"] and t["unix_ms"] > 1.6e12, f"{role}: time {t}")
        st = rep["settings"]
        expect(st["sizes"] == [8, 65536, 1048576] and st["iters"] == 50 and st["bw_iters"] == 16 and st["timeout_s"] == 60,
               f"{role}: effective settings {st}")
        expect(st["tx_depth"] == 8 and st["bw_unit"] == "MiB/s", f"{role}: tx_depth {st['tx_depth']}, unit {st['bw_unit']}")


def ha_ping_percent(run):
    expect(run.rc("a", "percent") == 0, "percent: client exit 0")
    rep = run.report("a", "percent")
    st = rep["settings"]
    expect(st["tx_depth"] == 16 and st["duration_s"] == 1, f"percent: -t 16 -D 1 -> {st['tx_depth']}, {st['duration_s']}")
    expect(st["min_bw"] == {"value": 1.0, "unit": "percent_of_link_speed"}, f"percent: min_bw {st['min_bw']}")
    expect(st["bw_unit"] == "Gb/s", "percent: --report_gbits -> Gb/s")
    r = rail(rep, 0)
    expect(r["status"] == "healthy", f"percent: rail 0 healthy ({r['reason']})")
    x = r["results"][0]
    expect(x["bw_unit"] == "Gb/s" and abs(x["bw"] - x["bw_mib_s"] * 1048576 * 8 / 1e9) < 1e-3 * max(1, x["bw"]),
           f"percent: bandwidth {x['bw']} Gb/s = {x['bw_mib_s']} MiB/s")
    if r["speed_mbps"] > 0:
        expect(abs(r["min_bw_mib_s"] - r["speed_mbps"] * 1e6 / 8 / 1048576 / 100) < 0.01,
               f"percent: threshold {r['min_bw_mib_s']} MiB/s = 1% of {r['speed_mbps']} Mbps")
    else:
        expect("not checked" in r["reason"], f"percent: unknown link speed said: {r['reason']}")
    txt = run.text("a", "percent.txt")
    expect(" Gb/s" in txt, "percent: text report says Gb/s")


def ha_ping_selected(run):
    for role in ("a", "b"):
        expect(run.rc(role, "selected") == 0, f"selected: {role} exit 0")
        rep = run.report(role, "selected")
        st = rep["settings"]
        expect(st["ib_dev"] == "rxe1" and st["ib_port"] == 1 and st["gid_index"] == 1,
               f"selected: {role}: -d rxe1 -i 1 -x 1 -> {st['ib_dev']}, {st['ib_port']}, {st['gid_index']}")
        locals_ = [r["local"] for r in rep["rails"]]
        expect(locals_ == ["rxe1:1"], f"selected: {role}: only rxe1:1 checked ({locals_})")
        r = rep["rails"][0]
        if role == "a":
            expect(r["status"] == "healthy", f"selected: rxe1:1 healthy ({r['reason']})")
        expect(r["qos"] and r["qos"]["gid_index"] == 1, f"selected: {role}: the QP uses GID index 1 ({r['qos']})")


def ha_ping_qos(run):
    expect(run.rc("a", "qos") == 0 and run.rc("b", "qos") == 0, "qos: exit 0 on both sides")
    for role, source in (("a", "--tclass"), ("b", "client")):
        rep = run.report(role, "qos")
        st = rep["settings"]
        expect(st["tclass"] == 96 and st["sl"] == 3 and st["tclass_source"] == source,
               f"qos: {role} settings tclass {st['tclass']} ({st['tclass_source']}) sl {st['sl']}")
        for r in rep["rails"]:
            q = r["qos"]
            expect(q is not None and q["tclass"] == 96 and q["requested_tclass"] == 96 and q["requested_sl"] == 3,
                   f"qos: {role} rail {r['index']} QP reads back tclass 96, requested sl 3: {q}")
            # Soft-RoCE keeps no SL in its address vector (rxe_av has none): it reads back 0.
            expect(q["sl"] in (3, 0), f"qos: {role} rail {r['index']} SL read back {q['sl']} (rxe: 0)")
        txt = run.text(role, "qos.txt")
        expect("tclass 96" in txt and ("sl 3" in txt), f"qos: {role} text report shows the QoS read back / requested")
    skipped = run.out("a", "qos-tcpdump.skipped")
    if skipped.exists():
        print(f"check: info: qos: tcpdump skipped: {skipped.read_text().strip()}")
        return
    dump = run.text("a", "qos-tcpdump.txt")
    tos = [line for line in dump.splitlines() if "tos 0x" in line]
    expect(len(tos) > 0 and all("tos 0x60" in line for line in tos),
           f"qos: {len(tos)} RoCE packet(s) on a's rail 0, all with tos 0x60")


def ha_ping_serve_clients(run):
    lines = [json.loads(x) for x in run.text("b", "serve-clients.json").splitlines() if x.strip()]
    expect([x.get("client") for x in lines] == [1, 2, 3],
           f"serve-clients: one JSON line per client: {[x.get('client') for x in lines]} (the non-ha-ping connection not counted)")
    expect("dropped a connection" in run.text("b", "serve-clients.log"), "serve-clients: the non-ha-ping connection was dropped")
    first = lines[0]
    expect(not first["ok"] and len(first["rails"]) == 1 and first["rails"][0]["status"] != "healthy",
           f"serve-clients: client 1 (killed) reported failed: {first['rails'][0]['status'] if first['rails'] else first.get('error')}"
           f" {first['rails'][0]['reason'] if first['rails'] else ''}")
    for rep in lines[1:]:
        expect(rep["ok"] and len(rep["rails"]) == 2 and all(r["status"] == "healthy" for r in rep["rails"]),
               f"serve-clients: client {rep['client']} served after the failed one, both rails healthy")
    expect(run.rc("b", "serve-clients") == 1, "serve-clients: server exit 1 (worst session: the killed client)")
    for n in (2, 3):
        expect(run.rc("a", f"serve-clients-{n}") == 0, f"serve-clients: client run {n} exit 0")
        rep = run.report("a", f"serve-clients-{n}")
        for i in (0, 1):
            expect_traffic(rail(rep, i), [8, 65536])


def ha_ping_list(run):
    for role in ("a", "b"):
        expect(run.rc(role, "list") == 0, f"list: {role}: --list (default plugin search) exit 0")
        txt = run.text(role, "list.txt")
        expect("rxe0" in txt and "rxe1" in txt and "standby rxe1:1" in txt, f"list: {role}: text names both ports and a standby port")
        expect(run.rc(role, "list-json") == 0, f"list: {role}: --list --json --plugin <build tree> exit 0")
        rep = run.report(role, "list")
        devs = {d["id"]: d for d in rep["devices"]}
        expect(sorted(devs) == ["rxe0:1", "rxe1:1"], f"list: {role}: devices {sorted(devs)}")
        for me, other in (("rxe0:1", "rxe1:1"), ("rxe1:1", "rxe0:1")):
            d = devs[me]
            expect(d["standby_port"].startswith(other), f"list: {role}: standby port of {me} is {d['standby_port']}")
            expect(d["gid_index"] >= 0 and d["max_comms"] > 0 and d["max_comms_budget"] and d["ptr_support"],
                   f"list: {role}: {me} gid {d['gid_index']} maxComms {d['max_comms']} ptrSupport {d['ptr_support']}")
        expect(rep["settings"] != "" and rep["api_version"] >= 6, f"list: {role}: settings line and API v{rep['api_version']}")


def ha_ping_rail_down(run):
    # Rail 0 pulled on b while ha-ping runs on it: b's async port event ends the rail.
    expect(run.rc("a", "mid-run") == 1, "mid-run: client exit 1")
    expect(run.rc("b", "mid-run") == 1, "mid-run: server exit 1")
    srv = run.report("b", "mid-run")
    r0 = rail(srv, 0)
    expect(r0["status"] == "down" and "port error on rxe0:1" in r0["reason"],
           f"mid-run: server saw the port-error event on rail 0: {r0['reason']}")
    rep = run.report("a", "mid-run")
    r0 = rail(rep, 0)
    expect(r0["status"] == "down" and r0["reason"].startswith("peer") and "port error" in r0["reason"],
           f"mid-run: client reports rail 0 down by the peer's port error: {r0['reason']}")
    secs = int(run.text("a", "mid-run.seconds"))
    expect(secs < 60, f"mid-run: client finished in {secs} s (< 60)")

    # Rail 0 already down when ha-ping starts.
    expect(run.rc("a", "pre-down") == 1, "pre-down: client exit 1")
    expect(run.rc("b", "pre-down") == 1, "pre-down: server exit 1")
    rep = run.report("a", "pre-down")
    r0, r1 = rail(rep, 0), rail(rep, 1)
    expect(r0["status"] == "down", f"pre-down: rail 0 reported down: {r0['reason']}")
    expect("not ACTIVE" in r0["reason"] and r0["reason"].startswith("peer"),
           "pre-down: rail 0 reason names the peer's inactive port")
    expect(r1["status"] == "healthy", f"pre-down: rail 1 healthy ({r1['reason']})")
    expect_traffic(r1, [8, 65536])
    srv = run.report("b", "pre-down")
    expect(rail(srv, 0)["status"] == "down" and "local" in rail(srv, 0)["reason"],
           f"pre-down: server: rail 0 down locally: {rail(srv, 0)['reason']}")


CHECKS = {
    "ha-ping-rails": ha_ping_rails,
    "ha-ping-rail-down": ha_ping_rail_down,
}

def find_check(name):
    """The check for test NAME: in CHECKS above, or checks/NAME.py (dashes as underscores)
    defining check(run); those modules import their helpers from this file (and from other
    modules in checks/, e.g. failover_common)."""
    if name in CHECKS:
        return CHECKS[name]
    module_file = Path(__file__).parent / "checks" / (name.replace("-", "_") + ".py")
    if not module_file.exists():
        return None
    import importlib.util
    spec = importlib.util.spec_from_file_location(module_file.stem, module_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.check


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    sys.path.insert(0, str(Path(__file__).parent / "checks"))  # shared check modules (failover_common)
    check = find_check(sys.argv[1]) if len(sys.argv) == 3 else None
    if check is None:
        print(f"usage: check.py NAME LOGDIR  (NAME: {', '.join(CHECKS)} or checks/NAME.py)")
        sys.exit(2)
    check(Run(Path(sys.argv[2])))
    print(f"check: {sys.argv[1]} passed")
