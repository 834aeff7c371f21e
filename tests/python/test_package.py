"""The installed package: no LibTorch in the extension, numpy-only use, version, file layout, the
`dsp` command and `python -m dsp`."""
import importlib.metadata
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

import dsp

REPO = pathlib.Path(__file__).resolve().parents[2]
TORCH_LIB = re.compile(r"\blib(torch|torch_cpu|torch_cuda|c10|c10_cuda)\.so")


def dynamic_dependencies(path):
    """The NEEDED entries of `path` (readelf) and every library the loader resolves (ldd)."""
    needed = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True)
    names = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", needed.stdout)
    assert names, needed.stdout  # a pattern that matches nothing would pass any module
    resolved = subprocess.run(["ldd", path], capture_output=True, text=True, check=True)
    return names, resolved.stdout


@pytest.mark.skipif(shutil.which("readelf") is None, reason="binutils not installed")
def test_extension_links_no_libtorch():
    names, resolved = dynamic_dependencies(dsp._dsp.__file__)
    assert any(n.startswith("libmpi") for n in names)  # the parser does see the real list
    assert not [n for n in names if TORCH_LIB.search(n)], names
    assert not TORCH_LIB.search(resolved), resolved


def test_numpy_only_without_torch(cora_p1):
    # A fresh interpreter in which `import torch` fails: dsp imports, the loader yields numpy
    # arrays, and what needs torch says so.
    code = f"""
import sys
sys.modules["torch"] = None
import numpy as np
import dsp
blocks, x, y = next(iter(dsp.Loader({cora_p1!r}, fanouts=[5], batch_size=8)))
assert isinstance(x, np.ndarray) and isinstance(blocks[0].indptr, np.ndarray), type(x)
for call in (lambda: dsp.Loader({cora_p1!r}, fanouts=[5], as_tensor=True),
             lambda: blocks[0].to_pyg()):
    try:
        call()
        raise SystemExit("no ImportError")
    except ImportError as e:
        print(e)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == ("dsp.Loader(as_tensor=True) needs torch, which cannot be imported here: "
                        "pip install torch, or pass as_tensor=False for numpy arrays")
    assert lines[1].startswith("Block.to_pyg() needs torch, which cannot be imported here (")
    assert lines[1].endswith("); install it with: pip install torch")


def test_version():
    project = re.search(r"project\(dsp VERSION ([0-9.]+)", (REPO / "CMakeLists.txt").read_text())
    assert dsp.__version__ == project.group(1)
    r = subprocess.run([dsp.cli_path(), "--version"], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == f"dsp {dsp.__version__}"


@pytest.mark.skipif(os.environ.get("DSP_TEST_INSTALLED") != "1",
                    reason="DSP_TEST_INSTALLED=1 only (scripts/test-python.sh)")
def test_imported_from_the_installed_package():
    pkg = pathlib.Path(dsp.__file__).resolve().parent
    # The venv's site-packages: not python/dsp of the source tree, nor <build>/python/dsp.
    assert pkg.parent.name == "site-packages", pkg
    assert pathlib.Path(sys.prefix).resolve() in pkg.parents, (pkg, sys.prefix)
    assert importlib.metadata.version("dsp") == dsp.__version__
    assert pathlib.Path(dsp.cli_path()).parent == pkg / "bin"


@pytest.mark.skipif(os.environ.get("DSP_TEST_INSTALLED") != "1",
                    reason="a build tree's CUDA is what its configure asked for (scripts/test.sh: ON)")
def test_build_info_says_whether_cuda_was_compiled():
    # pip install . builds with DSP_WITH_CUDA=AUTO: the CUDA backends are compiled where nvcc is
    # found (CUDA_HOME's, /usr/local/cuda's or PATH's) and nvidia-smi lists a GPU
    # (cmake/DspCuda.cmake).
    info = dsp.build_info()
    assert info["version"] == dsp.__version__ and isinstance(info["trainer"], bool)
    cuda_home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    nvcc = os.path.exists(f"{cuda_home}/bin/nvcc") or shutil.which("nvcc") is not None
    if not nvcc:
        pytest.skip("no nvcc on this machine: whether the build had one is unknown")
    smi = shutil.which("nvidia-smi")
    listed = smi and subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60).stdout
    gpu = bool(listed and re.search(r"GPU [0-9]+:", listed))
    assert info["cuda"] is gpu, info
    if gpu:
        assert info["cuda_archs"], info


def cli(*args, exe=None, **kw):
    """`exe ARGS` (default: the package's CLI itself)."""
    return subprocess.run([exe or dsp.cli_path(), *args], capture_output=True, text=True,
                          timeout=120, **kw)


def same_run(a, b):
    return (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr)


def test_python_m_dsp_is_the_cli(tmp_path):
    # `python -m dsp` execs the package's CLI with the same arguments: the same help, and a usage
    # error's exit code 2 and its one line on stderr.
    for args in (["--help"], ["train"]):
        ours = subprocess.run([sys.executable, "-m", "dsp", *args], capture_output=True,
                              text=True, timeout=120, cwd=tmp_path)
        assert same_run(ours, cli(*args, cwd=tmp_path)), (args, ours)
        if args == ["--help"]:
            assert ours.returncode == 0 and "Subcommands:" in ours.stdout, ours
    assert ours.returncode == 2 and ours.stdout == "", ours  # `train` with no dataset
    assert len(ours.stderr.splitlines()) == 1 and ours.stderr.startswith("dsp: error: "), ours


def test_python_m_dsp_keeps_the_clis_signals():
    # Python ignores SIGPIPE; the CLI it execs does not: writing --help into a pipe no one reads
    # ends it by SIGPIPE, as it ends the CLI run directly.
    read, write = os.pipe()
    os.close(read)
    try:
        for cmd in ([sys.executable, "-m", "dsp", "--help"], [dsp.cli_path(), "--help"]):
            r = subprocess.run(cmd, stdout=write, stderr=subprocess.PIPE, timeout=120)
            assert r.returncode == -13, (cmd, r)  # -SIGPIPE: killed by it, not an exit code
    finally:
        os.close(write)


@pytest.mark.skipif(os.environ.get("DSP_TEST_INSTALLED") != "1",
                    reason="DSP_TEST_INSTALLED=1 only (scripts/test-python.sh)")
def test_the_dsp_command(tmp_path):
    # pip installs the console script `dsp` beside the venv's python: the package's CLI with the
    # same arguments (output, exit code: 0, 1 for a runtime error, 2 for a usage error).
    script = pathlib.Path(sys.executable).parent / "dsp"
    assert script.is_file() and os.access(script, os.X_OK), script
    if sys.version_info >= (3, 10):
        entries = importlib.metadata.entry_points(group="console_scripts", name="dsp")
    else:
        entries = [e for e in importlib.metadata.entry_points().get("console_scripts", [])
                   if e.name == "dsp"]
    assert [e.value for e in entries] == ["dsp.__main__:main"]
    missing = str(tmp_path / "no such dataset")  # an argument with spaces, passed as one
    for args, code in ((["--version"], 0), (["info", missing], 1), (["train"], 2)):
        ours = cli(*args, exe=str(script), cwd=tmp_path)
        assert same_run(ours, cli(*args, cwd=tmp_path)), (args, ours)
        assert ours.returncode == code, (args, ours)
        if args == ["--version"]:
            assert ours.stdout == f"dsp {dsp.__version__}\n"
