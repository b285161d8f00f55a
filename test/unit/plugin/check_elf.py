#!/usr/bin/env python3
"""ctest unit.plugin_elf: libnccl-net-ha.so loads where NCCL runs.

Reads the built plugin with readelf and fails when
  - NEEDED names libstdc++ or libgcc_s (the C++ runtime must be linked in statically: a host
    with an older libstdc++ would refuse to load the plugin, and NCCL would silently fall back
    to its own transport),
  - any GLIBCXX_ / CXXABI_ / GCC_ symbol version is required,
  - a defined dynamic symbol is not allowed by the version script's `global:` patterns
    (src/plugin/api/exports.map: ncclNetPlugin_v*),
  - the object is marked NODELETE or has STB_GNU_UNIQUE dynamic symbols (dlclose would not
    unload it, and a reload would see stale state),
  - the highest GLIBC_x.y version it requires is above --max-glibc (printed either way).
Then it dlopens the plugin, checks that ncclNetPlugin_v12 resolves, dlcloses it, checks that it
is really unloaded (RTLD_NOLOAD finds nothing), and loads it a second time.

usage: check_elf.py PLUGIN.so EXPORTS.map [--max-glibc 2.34] [--readelf readelf] [--no-load]
"""
import argparse
import ctypes
import fnmatch
import os
import re
import subprocess
import sys


def readelf(tool, *args):
    out = subprocess.run([tool, "-W", *args], check=True, capture_output=True, text=True,
                         env={**os.environ, "LC_ALL": "C"})
    return out.stdout


def export_patterns(map_path):
    text = re.sub(r"/\*.*?\*/", "", open(map_path).read(), flags=re.S)
    m = re.search(r"global\s*:(.*?)(?:local\s*:|\})", text, flags=re.S)
    if not m:
        raise SystemExit(f"{map_path}: no global: section")
    return [p.strip() for p in m.group(1).split(";") if p.strip()]


def version_key(v):
    return tuple(int(x) for x in v.split("."))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("plugin")
    ap.add_argument("exports_map")
    ap.add_argument("--max-glibc", default="2.34")
    ap.add_argument("--readelf", default="readelf")
    ap.add_argument("--no-load", action="store_true")
    a = ap.parse_args()

    errors = []
    dyn = readelf(a.readelf, "-d", a.plugin)
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dyn)
    print("NEEDED:", " ".join(needed))
    for lib in needed:
        if lib.startswith(("libstdc++", "libgcc_s")):
            errors.append(f"NEEDED {lib}: the C++ runtime must be linked statically (-static-libstdc++ -static-libgcc)")
    flags1 = re.search(r"\(FLAGS_1\)\s+Flags:(.*)", dyn)
    if flags1 and "NODELETE" in flags1.group(1):
        errors.append(f"FLAGS_1 has NODELETE ({flags1.group(1).strip()}): dlclose would not unload the plugin")

    # Required symbol versions (.gnu.version_r).
    vers = readelf(a.readelf, "-V", a.plugin)
    required = sorted(set(re.findall(r"Name:\s+([A-Za-z_]+[0-9][0-9.]*)\s+Flags", vers)))
    glibc = sorted((v[len("GLIBC_"):] for v in required if re.fullmatch(r"GLIBC_[0-9.]+", v)), key=version_key)
    print("required versions:", " ".join(required))
    for v in required:
        if v.startswith(("GLIBCXX_", "CXXABI_", "GCC_")):
            errors.append(f"requires {v}: a C++ runtime / libgcc_s symbol is imported")
    if glibc:
        top = glibc[-1]
        print(f"highest GLIBC version required: GLIBC_{top} (bound: GLIBC_{a.max_glibc})")
        if version_key(top) > version_key(a.max_glibc):
            users = [line.strip() for line in readelf(a.readelf, "--dyn-syms", a.plugin).splitlines()
                     if f"@GLIBC_{top}" in line]
            errors.append(f"requires GLIBC_{top} > GLIBC_{a.max_glibc}, from: " + "; ".join(users))

    # Dynamic symbols: defined ones must be allowed by the version script; no GNU unique ones.
    patterns = export_patterns(a.exports_map)
    exported = []
    for line in readelf(a.readelf, "--dyn-syms", a.plugin).splitlines():
        f = line.split()
        # Num: Value Size Type Bind Vis Ndx Name
        if len(f) < 8 or not f[0].rstrip(":").isdigit():
            continue
        bind, ndx, name = f[4], f[6], f[7].split("@")[0]
        if bind == "UNIQUE":
            errors.append(f"STB_GNU_UNIQUE dynamic symbol {f[7]}: the plugin could never be unloaded")
        if ndx == "UND" or bind == "LOCAL" or f[3] in ("SECTION", "FILE"):
            continue
        exported.append(name)
        if not any(fnmatch.fnmatchcase(name, p) for p in patterns):
            errors.append(f"exports {f[7]} ({f[3]} {bind}), not allowed by {os.path.basename(a.exports_map)}")
    print("exported:", " ".join(sorted(exported)))
    if "ncclNetPlugin_v12" not in exported:
        errors.append("ncclNetPlugin_v12 is not exported")

    if not a.no_load and not errors:
        path = os.path.abspath(a.plugin)
        RTLD_NOLOAD = 0x4
        for attempt in (1, 2):
            lib = ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
            ctypes.c_void_p.in_dll(lib, "ncclNetPlugin_v12")
            # ctypes never dlcloses; do it ourselves, then prove the object is gone.
            libdl = ctypes.CDLL(None)
            libdl.dlclose.argtypes = [ctypes.c_void_p]
            if libdl.dlclose(ctypes.c_void_p(lib._handle)) != 0:
                errors.append(f"load {attempt}: dlclose failed")
                break
            try:
                ctypes.CDLL(path, mode=RTLD_NOLOAD | os.RTLD_NOW)
                errors.append(f"load {attempt}: still loaded after dlclose")
                break
            except OSError:
                print(f"load {attempt}: dlopen, ncclNetPlugin_v12 resolved, dlclose unloaded it")

    for e in errors:
        print("FAIL:", e)
    print("plugin ELF check:", "FAILED" if errors else "ok")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
