#!/usr/bin/env python3
"""One writer per state machine of a comm's control plane (src/plugin/core/control_plane.hpp, ControlPlane).

ControlPlane keeps its state machines private; each is written only through a friend struct
(FailoverWriter, ...) whose comment names the one file that defines it. The compiler enforces the
privacy; this check enforces the "one file": every writer is defined exactly once, in the file its
comment names, that file is HA's (src/plugin/ha/), and the writer is named nowhere else in the sources (a second definition in another file would
be an ODR violation a non-unity build does not report).

usage: check_writers.py SOURCE_ROOT
"""
import pathlib
import re
import sys


def main() -> int:
    root = pathlib.Path(sys.argv[1])
    comm = root / "src/plugin/core/control_plane.hpp"
    text = comm.read_text()
    writers = re.findall(r"friend struct (\w+Writer);\s*//\s*([\w./]+\.cpp):", text)
    errors = []
    if len(writers) < 5:
        errors.append(f"{comm}: expected the ControlPlane's writers (friend struct ...Writer; // file.cpp: ...), found {len(writers)}")
    sources = [p for p in root.glob("src/**/*") if p.suffix in (".cpp", ".hpp")]
    sources += [p for p in root.glob("test/**/*") if p.suffix in (".cpp", ".hpp")]
    sources += [p for p in root.glob("tools/**/*") if p.suffix in (".cpp", ".hpp")]
    for name, owner in writers:
        where = {}
        for p in sources:
            if p == comm:
                continue
            n = len(re.findall(rf"\b{name}\b", p.read_text(errors="replace")))
            if n:
                where[p.relative_to(root).as_posix()] = n
        owner_path = f"src/plugin/{owner}"
        if not owner.startswith("ha/"):
            errors.append(f"{name}: written in {owner_path}, outside src/plugin/ha/ (HA's state is written by HA only)")
        others = sorted(set(where) - {owner_path})
        if others:
            errors.append(f"{name} (written by {owner_path} only) is named in: {', '.join(others)}")
        if owner_path not in where:
            errors.append(f"{name}: not found in {owner_path}, the file control_plane.hpp names as its writer")
            continue
        defs = re.findall(rf"^struct {name} \{{", (root / owner_path).read_text(), re.M)
        if len(defs) != 1:
            errors.append(f"{name}: {len(defs)} definitions in {owner_path} (expected 1)")
    for e in errors:
        print("FAIL:", e)
    if not errors:
        print(f"ok: {len(writers)} writers, each defined once in its own file: " +
              ", ".join(f"{n} ({o})" for n, o in writers))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
