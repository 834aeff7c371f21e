"""The dsp Python extension (dsp._dsp) for the device's own Python, compiled there in seconds.

The kit is built here for CPython 3.11; the device image has 3.12, whose headers this machine
lacks. So `record` (here, at bundle time) keeps what building _dsp took in the kit's build tree:
the static libraries it links (copied into the kit), the compile command of each of its sources
(every src/python/*.cpp the build compiles into _dsp) and the link command, with every path of
this machine made a placeholder. `build` (on the device, or in the dry run) fills the
placeholders for the Python that runs it, compiles the sources, links, and lays out an importable
package (the pure-Python files, bin/dsp).

  python3 py_recipe.py record BUILD_DIR REPO KIT_PY_DIR
  python3 py_recipe.py build KIT_PY_DIR DEB_ROOT DSP_BINARY OUT_DIR
"""
import json
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig

OBJ_DIR = "src/python/CMakeFiles/_dsp.dir/"  # where the build puts _dsp's objects
MULTIARCH = "/usr/lib/x86_64-linux-gnu/"


# Arguments that name what every compiler or system has under another path: the compiler (from
# PATH), the C/C++ runtime's OpenMP and pthread libraries (g++ finds its own), zlib (Debian's
# libz.so points at an absolute path), the CUDA runtime (-lcudart follows, with CUDA's folder).
SYSTEM_ARGS = [(r"^/usr/bin/(c\+\+|g\+\+)$", "c++"), (r".*/libgomp\.so$", "-fopenmp"),
               (r".*/libpthread\.a$", "-lpthread"), (r".*/libz\.so$", "-l:libz.so.1"),
               (r".*/libcudart\.so$", None), (r"^-ffile-prefix-map=.*", None)]


def relocate(args, build, repo, kit_lib):
    """Placeholders for this machine's paths; the build's static libraries copied into kit_lib."""
    out = []
    for a in args:
        rule = next((r for r in SYSTEM_ARGS if re.match(r[0], a)), None)
        if rule:
            if rule[1]:
                out.append(rule[1])
            continue
        if a.endswith(".a") and not a.startswith("-"):
            src = pathlib.Path(a) if os.path.isabs(a) else pathlib.Path(build) / a
            shutil.copy2(src, kit_lib / src.name)
            a = "@KIT@/lib/" + src.name
        a = a.replace(f"{build}/", "@BUILD@/").replace(f"{repo}/", "")
        a = re.sub(r"[^ ]*/include/python3\.[0-9]+", "@PYINC@", a)
        a = a.replace(MULTIARCH, "@ROOT@" + MULTIARCH)
        a = re.sub(r"\.venv-cuda/lib/python3\.[0-9]+/site-packages/nvidia/", "@NV@/", a)
        out.append(a)
    return out


def record(build, repo, kit):
    kit_lib = pathlib.Path(kit) / "lib"
    kit_lib.mkdir(parents=True, exist_ok=True)
    entries = json.loads((pathlib.Path(build) / "compile_commands.json").read_text())
    # _dsp's sources: the compiles whose object goes to its folder (a new file needs no edit here).
    mine = {os.path.relpath(e["file"], repo): e for e in entries
            if OBJ_DIR in e.get("output", "") or f"-o {OBJ_DIR}" in e["command"]}
    sources = sorted(mine)
    if not sources:
        sys.exit(f"py_recipe: no compile of {OBJ_DIR} in {build}/compile_commands.json")
    compiles = []
    for src in sources:
        args = shlex.split(mine[src]["command"])
        i = args.index("-o")
        args[i + 1] = "@OUT@/" + pathlib.Path(src).stem + ".o"
        compiles.append(relocate(args, build, repo, kit_lib))
    cmds = subprocess.run(["ninja", "-C", build, "-t", "commands", "_dsp"], check=True,
                          capture_output=True, text=True).stdout.strip().splitlines()
    # Ninja's line is ": && <link> && :" (or the link alone): keep the part that writes _dsp.
    link = shlex.split(next(p for p in cmds[-1].split("&&") if " -o " in p and "_dsp" in p))
    objs = {f"{OBJ_DIR}{pathlib.Path(s).name}.o": pathlib.Path(s).stem for s in sources}
    link = ["@OUT@/" + objs[a] + ".o" if a in objs else a for a in link]
    missing = [a for a in link if OBJ_DIR in a]
    if missing:
        sys.exit(f"py_recipe: the link names objects no recorded compile makes: {missing}")
    i = link.index("-o")
    link[i + 1] = "@OUT@/dsp/_dsp@SUFFIX@"
    link = relocate(link, build, repo, kit_lib)
    left = [a for a in sum(compiles, []) + link
            if "@BUILD@" in a or repo in a or "/root/" in a or ".venv" in a or "/gcc/" in a]
    if left:
        sys.exit(f"py_recipe: paths of this build left in the recipe: {left}")
    (pathlib.Path(kit) / "recipe.json").write_text(json.dumps({"compile": compiles, "link": link}, indent=1))


def fill(args, values):
    out = []
    for a in args:
        for k, v in values.items():
            a = a.replace(k, v)
        out.append(a)
    return out


def build(kit, deb_root, dsp_bin, out):
    recipe = json.loads((pathlib.Path(kit) / "recipe.json").read_text())
    try:  # the device image has pybind11 from pip; here Debian's pybind11-dev is in /usr/include
        import pybind11
        pybind_inc = pybind11.get_include()
    except ImportError:
        pybind_inc = "/usr/include"
    pyinc = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(pyinc, "Python.h")):
        sys.exit(f"py_recipe: no Python.h in {pyinc}: this Python has no headers to build against")
    nv = pathlib.Path(__import__("torch").__file__).parents[1] / "nvidia"
    values = {"@KIT@": str(pathlib.Path(kit).resolve()), "@ROOT@": deb_root, "@PYINC@": pyinc,
              "@OUT@": out, "@NV@": str(nv), "@SUFFIX@": sysconfig.get_config_var("EXT_SUFFIX")}
    pkg = pathlib.Path(out) / "dsp"
    (pkg / "bin").mkdir(parents=True, exist_ok=True)
    # The kit's headers (fmt, json, ...) before any the image may have; /usr/include itself (where
    # Debian's pybind11 is) must not be named: -isystem /usr/include breaks libstdc++'s
    # #include_next <stdlib.h>.
    extra = ["-isystem", f"{deb_root}/usr/include"]
    if pybind_inc != "/usr/include":
        extra += ["-isystem", pybind_inc]
    procs = [subprocess.Popen(fill(c, values) + extra) for c in recipe["compile"]]
    if any(p.wait() != 0 for p in procs):
        sys.exit("py_recipe: compiling src/python failed")
    subprocess.run(fill(recipe["link"], values), check=True)
    for f in pathlib.Path("python/dsp").glob("*.py"):
        shutil.copy2(f, pkg / f.name)
    dst = pkg / "bin" / "dsp"
    if dst.exists() or dst.is_symlink():
        dst.unlink()
    dst.symlink_to(os.path.abspath(dsp_bin))
    print(f"py_recipe: {pkg} built for {sys.version.split()[0]}")


if __name__ == "__main__":
    if sys.argv[1] == "record":
        record(*sys.argv[2:5])
    elif sys.argv[1] == "build":
        build(*sys.argv[2:6])
    else:
        sys.exit(__doc__)
