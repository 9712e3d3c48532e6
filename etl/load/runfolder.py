"""Run folders: finding them, recognising their files by content, reading run.toml."""
from __future__ import annotations

import hashlib
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from etl.core.errors import InputError, RunError, name_text
from etl.extract import registry
from etl.extract.rawio import read_head
from etl.extract.registry import Format, Role

RUN_TOML = "run.toml"
DIMENSIONS: dict[str, type | tuple[type, ...]] = {
    "model": str, "framework": str, "framework_version": str, "exec_mode": str,
    "precision": str, "batch_size": int, "gpu": str, "tags": list, "sm_count": int,
    "synthetic": bool, "notes": str, "compute_capability": str,
    "ncu_iteration": int,  # the iteration the run's ncu export profiled
    "timezone": str,  # IANA zone of local times in monitor logs (nvidia-smi prints no zone)
    "gpu_memory_bytes": int,  # device's total memory where the trace does not say
    "nvidia_smi_query": str,  # the --query-gpu list of a noheader nvidia-smi log: its fields
    "step_pattern": str,  # regex of step markers (Kineto, nsys), group 1 the iteration number
    # the job's own time per iteration, for runs whose instruments record no iterations
    # (monitor logs): instrument_overhead compares it with the traced runs'
    "seconds_per_iteration": (int, float),
}


@dataclass
class RunFolder:
    """A scanned run folder. `name` and every relative path it hands out are valid UTF-8
    (name_text): they are stored in Parquet and printed, while `path` and the file lists
    keep the raw names for opening the files."""

    name: str
    path: Path
    inputs: list[tuple[Path, Format]] = field(default_factory=list)  # profiler files
    skipped: list[tuple[str, str]] = field(default_factory=list)
    # profiler output its reader found nothing to ingest in (an nsys stats summary)
    nothing_to_ingest: list[str] = field(default_factory=list)
    run_toml: Path | None = None
    single: Path | None = None  # the one file of a run given as a file, not a folder

    def of_role(self, role: Role) -> list[tuple[Path, Format]]:
        return [(p, f) for p, f in self.inputs if f.role == role]

    @property
    def traces(self) -> list[Path]:
        return [p for p, _ in self.of_role("trace")]

    def location(self) -> str:
        """The folder's absolute path as stored in `runs.run_path` (valid UTF-8): a parent
        folder's name may be as undecodable as the run's own; a file's for a run given as
        one file."""
        return name_text(str((self.single or self.path).resolve()))


@dataclass(frozen=True)
class RunTarget:
    """A run folder found under a PATH of `etl ingest`, and the run name it gets."""

    path: Path
    name: str


def find_run_folders(paths: list[Path], prefix: bool = False,
                     name: str | None = None) -> list[RunTarget]:
    """The run folders under each PATH, named by their folder (or, with `prefix`, by
    their path from PATH's parent, e.g. hta/trace_diff/control).

    A run folder directly holds profiler files or run.toml (or a layout a tool nests by
    convention, such as TensorFlow's plugins/profile/<session>/); its sub-folders belong
    to it. A folder whose profiler files are only in sub-folders is a parent: each
    sub-folder is looked at the same way. A sub-folder with no profiler file at any depth
    is a run too, refused with what it holds, so that nothing is left out in silence.
    """
    targets: list[RunTarget] = []
    for path in paths:
        if path.is_file():
            targets.append(RunTarget(path, _file_run(path)))
            continue
        if not path.is_dir():
            raise RunError(f"{path}: not a file or folder; pass a trace file, a run folder or "
                           "a folder of run folders")
        found = _runs_under(path.resolve(), set())
        if not found:
            raise RunError(_nothing_found(path))
        base = path.resolve().parent
        targets += [RunTarget(f, _run_name(f, base, prefix)) for f in found]
    if name is not None:
        if len(targets) != 1:
            raise RunError(f"--name {name}: {len(targets)} run folders found; --name names "
                           "one run (use --prefix to name many by their path)")
        targets = [RunTarget(targets[0].path, name)]
    _refuse_duplicate_names(targets)
    return targets


# what profilers add to a file's name: `rank0.pt.trace.json.gz` is the run `rank0`
PROFILER_SUFFIXES = (".gz", ".json", ".trace", ".pt", ".pb", ".xplane", ".sqlite", ".csv",
                     ".ncu-rep", ".log", ".txt", ".prom")


def file_run_name(file: Path) -> str:
    """A single file's run name: its name without the profiler's suffixes."""
    name = name_text(file.name)
    while (stem := name.rsplit(".", 1)[0]) and name.endswith(PROFILER_SUFFIXES):
        name = stem
    return name


def _file_run(file: Path) -> str:
    """The run name of a file given by itself, which must be profiler output."""
    fmt, _ = registry.recognise(file, read_head)
    if fmt is None:
        raise RunError(f"{file}: {_unrecognised(file)}; `etl formats` lists what is read "
                       "(a folder of such files is a run: pass the folder)")
    return file_run_name(file)


def _run_name(folder: Path, base: Path, prefix: bool) -> str:
    return name_text(folder.relative_to(base).as_posix() if prefix else folder.name)


def _nothing_found(path: Path) -> str:
    looked = ", ".join(f.name for f in registry.formats())
    return (f"{path}: no profiler output in this folder or its sub-folders (looked for "
            f"{looked} files and run.toml; `etl formats` says how each is recognised)")


def _runs_under(folder: Path, seen: set[tuple[int, int]]) -> list[Path]:
    """Run folders at or below `folder` (see find_run_folders); [] when no profiler file
    is anywhere below it."""
    st = folder.stat()
    if (st.st_dev, st.st_ino) in seen:
        return []  # a symlink loop: the run folder's own scan refuses it
    seen.add((st.st_dev, st.st_ino))
    if _is_run_folder(folder):
        return [folder]
    runs: list[Path] = []
    output_below = False
    for sub in _sub_folders(folder):
        below = _runs_under(sub, seen)
        output_below |= bool(below)
        runs += below or [sub]  # a sub-folder without output: a run refused for that
    return runs if output_below else []


def _sub_folders(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if not p.name.startswith(".") and p.is_dir())
    except OSError as exc:
        raise InputError(str(folder), f"cannot list folder ({exc.strerror})") from None


def _is_run_folder(path: Path) -> bool:
    for entry in path.iterdir():
        if not entry.is_file():
            continue
        if entry.name == RUN_TOML or registry.recognise(entry, read_head)[0] is not None:
            return True
    return any(next(path.glob(pattern), None) is not None for pattern in registry.layouts())


def _refuse_duplicate_names(targets: list[RunTarget]) -> None:
    # Compared by the stored name: b"caf\xe9" and a folder literally named `caf\xe9` are
    # one run name, so they are refused like any other pair of equal names.
    seen: dict[str, Path] = {}
    for target in targets:
        if target.name in seen and seen[target.name] != target.path:
            raise _duplicate(target.name, seen[target.name], target.path)
        seen[target.name] = target.path


def _duplicate(name: str, first: Path, second: Path) -> RunError:
    shown = [name_text(str(first)), name_text(str(second))]
    # b"r\xe9" and a folder literally named `r\xe9` print alike: say why they collide
    why = (" (one name holds bytes that are not UTF-8, written \\xNN)"
           if first.name != second.name else "")
    return RunError(f"two run folders named '{name}': {shown[0]} and {shown[1]}{why}; a run "
                    "name must be unique in one command (--prefix names runs by their path, "
                    "or rename one)")


def scan(path: Path, name: str | None = None) -> RunFolder:
    """Classify every file under the run folder (recursively, symlink loops refused); a
    file given by itself is a run of that one file (no run.toml)."""
    if path.is_file():
        run = RunFolder(name if name is not None else file_run_name(path), path.parent,
                        single=path)
        run.inputs.append((path, registry.recognise(path, read_head)[0] or _refused(path)))
        return run
    run = RunFolder(name if name is not None else name_text(path.name), path)
    others: list[Path] = []
    files = _walk(path, others)
    _refuse_equal_texts(path, files + others)
    for file in files:
        rel = relative(run, file)
        if file.name == RUN_TOML and file.parent == path:
            run.run_toml = file
            continue
        fmt, claimed = registry.recognise(file, read_head)
        if claimed and file.stat().st_size == 0:
            raise InputError(file, "file is empty", None,
                             "re-export it from the profiler, or remove the file")
        if fmt is None:
            run.skipped.append((rel, _unrecognised(file)))
        else:
            run.inputs.append((file, fmt))
    _not_regular(run, others)
    return run


def _refused(file: Path) -> Format:
    raise InputError(file, _unrecognised(file), None, "`etl formats` lists what is read")


def _not_regular(run: RunFolder, others: list[Path]) -> None:
    """Dangling symlinks and special files: refused if they claim a trace, else skipped."""
    for entry in others:
        what = "dangling or looping symlink" if entry.is_symlink() else "not a regular file"
        if registry.claims_any(entry.name):
            raise InputError(entry, what, None, "restore the file it points to, or remove it")
        run.skipped.append((relative(run, entry), what))


def _unrecognised(file: Path) -> str:
    """Why a file is not profiler output, in words a user can act on."""
    head = read_head(file)
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not head:
        return "empty file"
    if text[:1] in (b"{", b"["):
        return "JSON that no registered format recognises"
    return "not a recognised profiler output"


def _refuse_equal_texts(root: Path, files: list[Path]) -> None:
    """Two files whose stored paths would read the same (b"x\\xe9.json" beside a file
    literally named `x\\xe9.json`) would share one `sources` entry and sha256: refused."""
    seen: dict[str, Path] = {}
    for file in files:
        rel = name_text(os.path.relpath(file, root))
        if rel in seen:
            raise InputError(file, f"its name reads the same as '{rel}' once bytes that are "
                             "not UTF-8 are written as \\xNN", None, "rename one of the two")
        seen[rel] = file


def _walk(root: Path, others: list[Path]) -> list[Path]:
    """Regular files under root; everything else (dangling symlinks, fifos) into `others`."""
    files: list[Path] = []
    seen: set[tuple[int, int]] = set()
    stack = [root]
    while stack:
        folder = stack.pop()
        st = folder.stat()
        if (st.st_dev, st.st_ino) in seen:
            raise InputError(str(folder), "symlink loop in the run folder", None,
                             "remove the symlink that points back into the folder")
        seen.add((st.st_dev, st.st_ino))
        try:
            entries = sorted(folder.iterdir())
        except OSError as exc:
            raise InputError(str(folder), f"cannot list folder ({exc.strerror})") from None
        for entry in entries:
            _classify_entry(entry, files, stack, others)
    return sorted(files)


def _classify_entry(entry: Path, files: list[Path], stack: list[Path],
                    others: list[Path]) -> None:
    try:
        if entry.is_dir():
            stack.append(entry)
        elif entry.is_file():
            files.append(entry)
        else:
            others.append(entry)
    except OSError as exc:  # ELOOP on a self-referencing symlink
        raise InputError(str(entry), f"cannot follow ({exc.strerror})", None,
                         "remove the broken or looping symlink") from None


def read_run_toml(path: Path) -> tuple[dict[str, Any], str]:
    """Validated experiment dimensions and the verbatim text."""
    text_bytes = path.read_bytes()
    try:
        text = text_bytes.decode("utf-8")
        doc = tomllib.loads(text)
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(path, f"not valid TOML ({exc})", None,
                         "fix the syntax; see the README for the run.toml keys") from None
    for key, value in doc.items():
        expected = DIMENSIONS.get(key)
        if expected is not None and not _type_ok(value, expected):
            raise InputError(path, f"key {key!r} has a {type(value).__name__}, expected "
                             f"{getattr(expected, '__name__', expected)}", f"key {key}",
                             "fix the value's type")
    tags = doc.get("tags", [])
    if not all(isinstance(t, str) for t in tags):
        raise InputError(path, "tags must be a list of strings", "key tags", "quote each tag")
    for key in ("batch_size", "sm_count"):
        if key in doc and not 0 < doc[key] < (1 << 31):
            raise InputError(path, f"{key} must be positive (an integer below 2^31)",
                             f"key {key}", "fix the value")
    if "gpu_memory_bytes" in doc and not 0 < doc["gpu_memory_bytes"] < (1 << 63):
        raise InputError(path, "gpu_memory_bytes must be a positive number of bytes",
                         "key gpu_memory_bytes", "write the total in bytes, e.g. "
                         "17179869184 for 16 GiB")
    if "step_pattern" in doc:
        _check_step_pattern(path, doc["step_pattern"])
    seconds = doc.get("seconds_per_iteration")
    if seconds is not None and (isinstance(seconds, bool) or not 0 < seconds < 1e6):
        raise InputError(path, "seconds_per_iteration must be a positive number of seconds",
                         "key seconds_per_iteration", "write the training log's time per "
                         "iteration, e.g. 0.125")
    return doc, text


def _check_step_pattern(path: Path, pattern: str) -> None:
    """A Python regex with a group for the iteration number (etl/extract/step_names.py)."""
    import re

    try:
        groups = re.compile(pattern).groups
    except re.error as exc:
        raise InputError(path, f"step_pattern is not a regular expression ({exc})",
                         "key step_pattern", "fix the pattern, e.g. '^step (\\d+)$'") from None
    if groups < 1:
        raise InputError(path, "step_pattern has no group for the iteration number",
                         "key step_pattern", "put the number in parentheses: '^step (\\d+)$'")


def _type_ok(value: Any, expected: type | tuple[type, ...]) -> bool:
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, expected)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def run_id_for(name: str, files: list[tuple[str, str]]) -> str:
    """Content hash of the run: its name and each input file's relative path and sha256."""
    digest = hashlib.sha256(name.encode("utf-8", "surrogateescape"))
    for rel, sha in sorted(files):
        digest.update(b"\0" + rel.encode("utf-8", "surrogateescape") + b"\0" + sha.encode())
    return digest.hexdigest()[:16]


def relative(run: RunFolder, file: Path) -> str:
    """The file's path inside the run folder as stored in `runs` (valid UTF-8)."""
    return name_text(os.path.relpath(file, run.path))
