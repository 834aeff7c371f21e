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

from . import _dsp, _wording

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
    ``mean_epoch_s``, ``epochs_run``, ... (rank 0's; ``None`` for a split the data does not
    have), and ``history``: one dict per epoch trained (``epoch`` from 1, ``loss``,
    ``train_acc``, ``lr``, ``epoch_s``, and after an evaluation ``val`` and ``test`` in the
    job's metric).

    Raises the ``dsp.Error`` subclass of the CLI's error (``dsp.InvalidArgument``,
    ``dsp.IoError``, ``dsp.FormatError``, ...) with its one-line message; the first rank's error
    when several ranks fail.

    Call it from one process: inside an ``mpirun`` job (every rank running this script) it raises
    ``dsp.NotSupported``, as each rank would start a job of its own. To train under an existing
    ``mpirun``, iterate ``dsp.Loader`` with your own model, or run ``mpirun -np P dsp train``.
    """
    exe = _check_launch("train", ranks)
    try:
        text = json.dumps(dict(config))
    except (TypeError, ValueError) as e:
        raise _dsp.InvalidArgument(f"config must be a JSON-serialisable dict: {e}") from None
    with tempfile.TemporaryDirectory(prefix="dsp-train-") as tmp:
        config_file = os.path.join(tmp, "config.json")
        result_file = os.path.join(tmp, "result.json")
        with open(config_file, "w") as f:
            f.write(text)
        # The messages name the temporary config file; the caller passed a dict called config.
        _launch(exe, "train", ["--config", config_file, "--result", result_file], ranks, mpirun,
                rename=(config_file, "config"))
        with open(result_file) as f:
            return json.load(f)


def _check_launch(sub: str, ranks) -> str:
    """The package's CLI, after the checks every command run out of process shares."""
    if not _dsp.has_trainer:
        raise _dsp.NotSupported(f"dsp.{sub}: this dsp was built without the trainer (LibTorch was "
                                "not found at build time: apt install libtorch-dev, then "
                                "reinstall dsp)")
    if any(v in os.environ for v in _MPI_LAUNCHER_VARS):
        raise _dsp.NotSupported(f"dsp.{sub} starts a job of its own (under mpirun when ranks > 1):"
                                " call it from one process, not from every rank of an mpirun job")
    if not isinstance(ranks, int) or ranks < 1:
        raise _dsp.InvalidArgument(f"ranks must be an integer >= 1, got {ranks!r}")
    exe = cli_path()
    if not os.access(exe, os.X_OK):
        raise _dsp.NotSupported(f"dsp.{sub}: the dsp CLI is missing from the package ({exe}); "
                                "reinstall dsp")
    return exe


def _launch(exe: str, sub: str, args: List[str], ranks: int, mpirun: Sequence[str],
            rename: Tuple[str, str] = ("", "")) -> None:
    """Runs ``dsp SUB ARGS`` (under ``mpirun -np RANKS`` when ranks > 1); raises its error."""
    cmd = [exe, sub, *args]
    if ranks > 1:
        cmd = [*mpirun, "-np", str(ranks), *cmd]
    try:
        code, errors, other = _run(cmd, dict(os.environ, DSP_ERROR_TYPE="1"))
    except FileNotFoundError:
        raise _dsp.NotSupported(f"dsp.{sub}: cannot run {cmd[0]}: not found") from None
    if code == 0:
        return
    for type_name, message in errors[1:]:  # other ranks' errors: shown, the first one is raised
        sys.stderr.write(f"dsp: error: {message}\n")
    if errors:
        type_name, message = errors[0]
        if rename[0]:
            message = message.replace(*rename)
        if sub != "train":  # its flags are keywords of the call (dsp.train's are config keys)
            message = _wording.python_wording(message)
        raise _exception(type_name, message, code)
    last = other[-1].strip() if other else "no message"
    how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
    raise _exception(None, f"dsp {sub} {how}: {last}", code)


def _inference(sub: str, path: str, checkpoint: str, out: str, extra: List[str], nodes,
               ranks: int, mpirun: Sequence[str], overwrite: bool) -> List[str]:
    exe = _check_launch(sub, ranks)
    args = [str(path), "--checkpoint", str(checkpoint), "--out", str(out), *extra]
    if overwrite:
        args.append("--overwrite")
    with tempfile.TemporaryDirectory(prefix=f"dsp-{sub}-") as tmp:
        if nodes is not None:
            if not isinstance(nodes, (str, os.PathLike)):
                import numpy as np
                ids = np.asarray(nodes)
                if ids.ndim != 1 or ids.dtype.kind not in "iu":
                    raise _dsp.InvalidArgument("nodes must be a 1-d array of integer node ids or "
                                               "the path of one (.npy)")
                file = os.path.join(tmp, "nodes.npy")
                np.save(file, ids.astype(np.int64))
                nodes = file
            args += ["--nodes", str(nodes)]
        _launch(exe, sub, args, ranks, mpirun)
    return args


def predict(path: str, checkpoint: str, out: str, *, output: str = "class", nodes=None,
            ranks: int = 1, mpirun: Sequence[str] = ("mpirun",), overwrite: bool = False) -> dict:
    """``dsp predict``: a trained model's predictions for every node (or ``nodes``).

    Full-neighbour layer-wise inference with the model of ``checkpoint`` (``checkpoint.pt`` or
    ``best.pt`` of ``dsp train --checkpoint-dir``) over the dataset or partition directory
    ``path``, in a child process like :func:`train`. Writes ``predictions.npy`` (and
    ``probabilities.npy`` or ``logits.npy`` with ``output="probs"``/``"logits"``) to ``out`` and
    returns them as numpy arrays keyed by file stem. Row i is node i of the dataset (its own
    ids), or the i-th id of ``nodes`` (an integer array or a .npy path).
    """
    import numpy as np
    _inference("predict", path, checkpoint, out, ["--output", output], nodes, ranks, mpirun,
               overwrite)
    names = {"class": ["predictions"], "probs": ["predictions", "probabilities"],
             "logits": ["predictions", "logits"]}[output]
    return {n: np.load(os.path.join(out, n + ".npy")) for n in names}


def embed(path: str, checkpoint: str, out: str, *, layer: Optional[int] = None, nodes=None,
          node_type: Optional[str] = None, ranks: int = 1, mpirun: Sequence[str] = ("mpirun",),
          overwrite: bool = False):
    """``dsp embed``: every node's (or ``nodes``') output of a model layer, as :func:`predict`.

    ``layer`` (0-based; default the last hidden layer) is exported after its activation to
    ``out/embeddings.npy``, which is returned as a numpy array [nodes, width]. ``node_type``
    (a typed model): the type whose nodes are exported, row i its node i (default: the target
    type; a typed link model's two types are its relation's).
    """
    import numpy as np
    extra = [] if layer is None else ["--layer", str(layer)]
    extra += [] if node_type is None else ["--node-type", str(node_type)]
    _inference("embed", path, checkpoint, out, extra, nodes, ranks, mpirun, overwrite)
    return np.load(os.path.join(out, "embeddings.npy"))
