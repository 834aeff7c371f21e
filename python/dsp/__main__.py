"""``dsp`` (the console script ``pip install .`` installs) and ``python -m dsp``: the package's CLI.

Both replace this process (``os.execv``) with the CLI the package ships, ``dsp/bin/dsp``
(``dsp.cli_path()``), given the same arguments, so that output, exit code and signals are the
CLI's own: ``dsp train D`` and ``python -m dsp train D`` run ``dsp/bin/dsp train D``, under
``mpirun -np P`` too.
"""
import os
import signal
import sys

from ._train import cli_path


def main(argv=None):
    """Execs the package's CLI with ``argv`` (default ``sys.argv[1:]``); returns only on failure."""
    args = sys.argv[1:] if argv is None else list(argv)
    exe = cli_path()
    # Python ignores SIGPIPE and SIGXFSZ, and an ignored signal stays ignored across exec: give
    # the CLI the defaults a shell gives it (as subprocess's restore_signals does).
    for name in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(exe, ["dsp", *args])
    except OSError as e:
        sys.stderr.write(f"dsp: error: cannot run the package's CLI {exe}: {e.strerror}; "
                         "reinstall dsp\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
