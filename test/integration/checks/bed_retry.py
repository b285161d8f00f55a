"""bed-retry: run-pair.sh boots a run once more when a guest's kernel panicked in
rxe_skb_tx_dtor (the Linux 6.1 Soft-RoCE bug) and wrote no exit code. The first boot's logs are
kept in NAME.rxe-crash/: b's console shows the panic line and b has no exit code; the second
boot (the one judged by vm-test.sh) ran with NCCL_HA_VM_BED_RETRIES=0 in both guests, so a
second panic would have failed the test."""
from check import expect


def check(run):
    crashed = run.dir.parent / f"{run.dir.name}.rxe-crash"
    expect(crashed.is_dir(), f"the crashed boot's logs were kept ({crashed})")
    console = (crashed / "b" / "console.log").read_text(errors="replace")
    expect("RIP: 0010:rxe_skb_tx_dtor" in console, "b's console in the first boot shows the rxe_skb_tx_dtor panic")
    expect(not (crashed / "b" / "exit_code").exists(), "b wrote no exit code in the first boot")
    for role in ("a", "b"):
        expect(run.text(role, "retries_left.txt") == "0",
               f"{role}: the second boot ran with no retry left ({run.text(role, 'retries_left.txt')})")
