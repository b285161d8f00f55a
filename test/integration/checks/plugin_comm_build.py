"""plugin-comm-build: the unit test test_comm_build, run on the Soft-RoCE bed (a only). Natively it
has no RDMA port and skips every case; here every case must have run and passed: a skipped case
(the bed lost a device, a precondition changed) fails this check, and so does a case that vanished
or one this list does not know (update CASES with the test)."""
import re

from check import expect, fail

SUITE = "comm_build"
CASES = [
    "comms_take_the_settings_passed_in",
    "comms_without_settings_keep_the_defaults",
    "paths_go_to_the_reaper_passed_in_and_die_after_the_comm",
    "attach_standby_adds_slot_1_on_the_standby_device",
    "adaptive_routing_deepens_a_send_comms_send_queue",
    "a_path_the_device_refuses_is_an_error_and_leaks_nothing",
]
SKIPPED = re.compile(r"skipped|precondition failed|disabled", re.IGNORECASE)


def check(run):
    log = run.text("a", "comm-build.log")
    report = run.text("a", "comm-build.report")
    rc = run.rc("a", "comm-build")
    for line in report.splitlines():
        print(f"check: info: report: {line}")
    skipped = [line.strip() for line in (log + "\n" + report).splitlines() if SKIPPED.search(line)]
    expect(not skipped, f"no case skipped ({len(skipped)} line(s) say one was; the first: {skipped[:1]})")
    entered = re.findall(r'Entering test case "([^"]+)"', log)
    expect(sorted(entered) == sorted(CASES), f"the cases that ran are exactly the expected {len(CASES)} ({entered})")
    for case in CASES:
        left = re.search(rf'Leaving test case "{case}"', log)
        passed = re.search(rf'Test case "{SUITE}/{case}" has passed', report)
        expect(left and passed, f"{case}: ran to its end and passed")
    expect(re.search(rf"\b{len(CASES)} test cases? out of {len(CASES)} passed", report) is not None,
           f"the report: {len(CASES)} test cases out of {len(CASES)} passed")
    m = re.search(r"(\d+) assertions? out of (\d+) passed", report)
    if not m:
        fail("the report counts no assertions")
    expect(int(m.group(1)) == int(m.group(2)) and int(m.group(2)) >= 100,
           f"every assertion passed ({m.group(1)} of {m.group(2)}, at least 100)")
    expect(rc == 0, f"test_comm_build exit 0 (exit {rc})")
