"""dsp.train: the built-in trainer, run as the ``dsp train`` CLI in a child process.

The trainer is C++ on LibTorch. Linking it into the extension would load a second libtorch into
any interpreter whose torch is another build (two libtorch/libc10 cannot share a process), so the
package ships the CLI as ``dsp/bin/dsp`` next to the extension and runs it with the same config.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from typing import List, Optional, Sequence, Tuple

from . import _dsp

# The CLI prints one line per error; DSP_ERROR_TYPE=1 makes it name the class (tools/dsp.cpp).
_ERROR_LINE = re.compile(r"^dsp: error(?: \((\w+)\))?(?: on rank \d+)?: (.*)$")
_MPI_LAUNCHER_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK")


def cli_path() -> str:
    """The ``dsp`` command-line tool of this package (``bin/dsp`` next to the extension)."""
    return os.path.join(os.path.dirname(os.path.abspath(_dsp.__file__)), "bin", "dsp")


def _exception(type_name: Optional[str], message: str, code: int) -> Exception:
    cls = getattr(_dsp, type_name, None) if type_name else None
    if not (isinstance(cls, type) and issubclass(cls, _dsp.Error)):
        cls = _dsp.InvalidArgument if code == 2 else _dsp.Error
    return cls(message)


def _run(cmd: List[str], env: dict) -> Tuple[int, List[Tuple[Optional[str], str]], List[str]]:
    """Runs `cmd`, forwarding its output to sys.stdout/sys.stderr except the error lines.

    Returns the exit code, the error lines (class, message) in order, and the other stderr lines.
    """
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            text=True, errors="replace")
    errors, other = [], []

    def pump_stderr():
        for line in proc.stderr:
            m = _ERROR_LINE.match(line.rstrip("\n"))
            if m:
                errors.append(m.groups())
            else:
                other.append(line)
                sys.stderr.write(line)

    pump = threading.Thread(target=pump_stderr, daemon=True)
    pump.start()
    try:
        for line in proc.stdout:
            sys.stdout.write(line)
        proc.wait()
    except BaseException:  # KeyboardInterrupt included: end the job, not only this process
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise
    finally:
        pump.join()
    return proc.returncode, errors, other


def train(config: dict, *, ranks: int = 1, mpirun: Sequence[str] = ("mpirun",)) -> dict:
    """Runs the built-in trainer, ``dsp train --config``, with a config dict; returns its result.

    Keys as in a ``dsp train --config`` file (``path``, ``model``, ``fanouts``, ``epochs``,
    ``max_steps``, ...).
    The job runs in a child process: the CLI shipped in this package (``dsp.cli_path()``), which
    carries its own LibTorch, so the interpreter's torch (any version, or none) is not involved.
    Its output is forwarded to ``sys.stdout``/``sys.stderr``.

    Args:
        config: the ``--config`` dict; relative paths are relative to the current directory.
        ranks: number of ranks; more than one starts ``mpirun -np RANKS dsp train ...``.
        mpirun: the launcher command and its options, e.g. ``("mpirun", "--oversubscribe")``.

    Returns the job result: ``best_val_acc``, ``test_acc_at_best``, ``final_loss``,
    ``mean_epoch_s``, ``epochs_run``, ... (rank 0's).

    Raises the ``dsp.Error`` subclass of the CLI's error (``dsp.InvalidArgument``,
    ``dsp.IoError``, ``dsp.FormatError``, ...) with its one-line message; the first rank's error
    when several ranks fail.

    Call it from one process: inside an ``mpirun`` job (every rank running this script) it raises
    ``dsp.NotSupported``, as each rank would start a job of its own. To train under an existing
    ``mpirun``, iterate ``dsp.Loader`` with your own model, or run ``mpirun -np P dsp train``.
    """
    if not _dsp.has_trainer:
        raise _dsp.NotSupported("dsp.train: this dsp was built without the trainer (LibTorch was "
                                "not found at build time: apt install libtorch-dev, then "
                                "reinstall dsp)")
    if any(v in os.environ for v in _MPI_LAUNCHER_VARS):
        raise _dsp.NotSupported("dsp.train starts a job of its own (under mpirun when ranks > 1): "
                                "call it from one process, not from every rank of an mpirun job")
    if not isinstance(ranks, int) or ranks < 1:
        raise _dsp.InvalidArgument(f"ranks must be an integer >= 1, got {ranks!r}")
    exe = cli_path()
    if not os.access(exe, os.X_OK):
        raise _dsp.NotSupported(f"dsp.train: the dsp CLI is missing from the package ({exe}); "
                                "reinstall dsp")
    try:
        text = json.dumps(dict(config))
    except (TypeError, ValueError) as e:
        raise _dsp.InvalidArgument(f"config must be a JSON-serialisable dict: {e}") from None
    with tempfile.TemporaryDirectory(prefix="dsp-train-") as tmp:
        config_file = os.path.join(tmp, "config.json")
        result_file = os.path.join(tmp, "result.json")
        with open(config_file, "w") as f:
            f.write(text)
        cmd = [exe, "train", "--config", config_file, "--result", result_file]
        if ranks > 1:
            cmd = [*mpirun, "-np", str(ranks), *cmd]
        try:
            code, errors, other = _run(cmd, dict(os.environ, DSP_ERROR_TYPE="1"))
        except FileNotFoundError:
            raise _dsp.NotSupported(f"dsp.train: cannot run {cmd[0]}: not found") from None
        if code == 0:
            with open(result_file) as f:
                return json.load(f)
    for type_name, message in errors[1:]:  # other ranks' errors: shown, the first one is raised
        sys.stderr.write(f"dsp: error: {message}\n")
    if errors:
        type_name, message = errors[0]
        # The messages name the temporary config file; the caller passed a dict called config.
        raise _exception(type_name, message.replace(config_file, "config"), code)
    last = other[-1].strip() if other else "no message"
    how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
    raise _exception(None, f"dsp train {how}: {last}", code)
