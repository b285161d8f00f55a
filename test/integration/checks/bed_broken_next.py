"""bed-broken-next: the second test of vm.bed-broken's group (checks/bed_broken.py): not run in the
broken boot, run (rail 0 answering) in the new one."""
from bed_broken import check_rerun


def check(run):
    check_rerun(run, first_ran=False)
