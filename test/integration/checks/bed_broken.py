"""bed-broken: the boot group's check of the bed between two tests (group.guest.sh, vm-group.sh).
In the first boot a's rail 0 was broken after this test where the reset does not mend it
(NCCL_HA_VM_BREAK_BED_AFTER): both guests must have found it, a's view names the rail, the group
must have stopped there (bed-broken-next not run, exit 124), and this test and the next must have
run again in a new boot, their first run's files kept in NAME.bed-broken/ and the reason in
NAME/bed.txt. Before the check existed, the group ran on and nothing was booted again."""
from check import expect


def boot_of(run_dir, role):
    p = run_dir / role / "out" / "boot_id.txt"
    return p.read_text().strip() if p.exists() else None


def check_rerun(run, first_ran):
    first = run.dir.parent / f"{run.dir.name}.bed-broken"
    expect(first.is_dir(), f"the first run's files were kept ({first})")
    note = run.dir / "bed.txt"
    expect(note.exists(), f"{note} says why this test ran again")
    text = note.read_text()
    expect("the bed broke (found after bed-broken)" in text and "rail 0" in text and "answers no ping" in text
           and "a new boot" in text, f"bed.txt names the broken rail and the new boot: {text.strip()}")
    for role in ("a", "b"):
        expect((run.dir / role / "exit_code").read_text().strip() == "0", f"{role}: exit 0 in the new boot")
        now, before = boot_of(run.dir, role), boot_of(first, role)
        expect(now is not None, f"{role}: ran in the new boot ({now})")
        if first_ran:
            expect(before is not None and before != now, f"{role}: the first run was in another boot ({before} != {now})")
        else:
            expect(before is None and (first / role / "exit_code").read_text().strip() == "124",
                   f"{role}: not run in the broken boot (exit 124)")
    return first


def check(run):
    first = check_rerun(run, first_ran=True)
    boot = (first / "a" / "console.log").resolve().parent.parent
    view = (boot / "a" / "out" / "bed-broken.log").read_text()
    expect(view.startswith("the bed broke (found after bed-broken): a: rail 0 "),
           f"a's view of the broken bed, first line: {view.splitlines()[0]}")
    expect("02:00:00:00:00:01 PERMANENT" in view, "a's view lists the rail's neighbours (the planted entry)")
    expect("--- the kernel's last lines" in view, "a's view has the kernel's last lines")
    expect((boot / "b" / "out" / "bed-broken.log").exists(), "b wrote its view too")
