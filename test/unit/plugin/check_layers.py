#!/usr/bin/env python3
"""The plugin's layers (src/plugin/README.md): a folder includes only itself and the folders below it.

Bottom up: abi (NCCL's declarations), runtime, core, ha, datapath, setup, api. Every include of a
plugin header names its folder ("core/comm.hpp"); the abi headers are included by name. Also:
no source file lies outside the layer folders, no files include each other in a circle (a source
and its header counted as one: x.cpp includes what x.hpp's users get), and the libraries below
the plugin (src/net, src/reactor) include none of its headers. HA has one face: the data path and
connection setup include nothing of ha/ but ha/face.hpp (ha/README.md).

usage: check_layers.py SOURCE_ROOT
"""
import pathlib
import re
import sys

LAYERS = ["abi", "runtime", "core", "ha", "datapath", "setup", "api"]
HA_FACE = "ha/face.hpp"
FACE_ONLY = ("datapath", "setup")  # the layers that meet HA through its face alone
SOURCES = (".cpp", ".hpp", ".h")


def circles(graph):
    """The strongly connected components of more than one unit (Tarjan), each as a closed walk."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w == v:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp) + [sorted(comp)[0]])

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def main() -> int:
    root = pathlib.Path(sys.argv[1])
    plugin = root / "src/plugin"
    rank = {name: i for i, name in enumerate(LAYERS)}
    abi = {p.name for p in (plugin / "abi").iterdir() if p.suffix == ".h"}
    errors = []
    files = sorted(p for p in plugin.rglob("*") if p.suffix in SOURCES)
    unit = {}  # "core/comm" -> the units it includes (x.cpp and x.hpp are one unit)
    if not files:
        errors.append(f"{plugin}: no sources")
    for f in files:
        rel = f.relative_to(plugin)
        layer = rel.parts[0]
        if layer not in rank:
            errors.append(f"{rel}: outside the layer folders ({', '.join(LAYERS)})")
            continue
        for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if not m:
                continue
            inc = m.group(1)
            if inc.startswith("nccl_ha/"):  # src/net, src/reactor: below every layer
                continue
            if "/" not in inc:
                if inc not in abi and not (f.parent / inc).exists():
                    errors.append(f"{rel}:{n}: #include \"{inc}\": not an abi header (write its folder)")
                elif inc not in abi:
                    errors.append(f"{rel}:{n}: #include \"{inc}\": name the folder (\"{layer}/{inc}\")")
                continue
            target = inc.split("/")[0]
            if target in rank and target != "abi":
                src_unit = rel.with_suffix("").as_posix()
                unit.setdefault(src_unit, set()).add(pathlib.PurePosixPath(inc).with_suffix("").as_posix())
            if target not in rank:
                if layer != "api" or not (f.parent / inc).exists():  # api/compat: its own files
                    errors.append(f"{rel}:{n}: #include \"{inc}\": no layer folder {target}/")
                continue
            if not (plugin / inc).exists():
                errors.append(f"{rel}:{n}: #include \"{inc}\": no such file")
            if rank[target] > rank[layer]:
                errors.append(f"{rel}:{n}: #include \"{inc}\": {layer}/ includes {target}/, a layer above it")
            if target == "ha" and layer in FACE_ONLY and inc != HA_FACE:
                errors.append(f"{rel}:{n}: #include \"{inc}\": {layer}/ meets HA through {HA_FACE} only")
    errors += [f"files include each other in a circle: {' -> '.join(c)}" for c in circles(unit)]
    for lib in ("src/net", "src/reactor"):
        for f in sorted((root / lib).rglob("*")):
            if f.suffix not in SOURCES:
                continue
            for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if m and m.group(1).split("/")[0] in rank:
                    errors.append(f"{f.relative_to(root)}:{n}: #include \"{m.group(1)}\": {lib} is below the plugin")
    for e in errors:
        print("FAIL:", e)
    if not errors:
        print(f"ok: {len(files)} files in {len(LAYERS)} layers ({' < '.join(LAYERS)}), no include runs up, no circle; "
              f"{' and '.join(FACE_ONLY)} include of ha/ only {HA_FACE}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
