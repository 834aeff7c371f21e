"""The ranks of an mpirun job seen from outside: shared by the job scripts (chaos.py, soak.py)."""
import os


def rank_pids(session, ranks, tag=None):
    """pid of each rank < `ranks` (OMPI_COMM_WORLD_RANK) among the processes of `session` (the
    launcher's session: not a previous start's rank still exiting), and whose command line holds
    `tag` when one is given."""
    found = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            if os.getsid(int(p)) != session:
                continue
            if tag is not None:
                with open(f"/proc/{p}/cmdline", "rb") as f:
                    if tag.encode() not in f.read():
                        continue
            with open(f"/proc/{p}/environ", "rb") as f:
                env = dict(e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e)
        except OSError:
            continue
        r = env.get(b"OMPI_COMM_WORLD_RANK")
        if r is not None and int(r) < ranks:
            found[int(r)] = int(p)
    return found
