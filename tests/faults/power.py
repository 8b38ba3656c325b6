"""The power-loss fault: after every node is SIGKILLed, cut the data dirs as an OS crash would.

A process kill loses nothing the process wrote: the page cache survives. A power loss (an OS
crash) loses whatever the kernel had not written back, and what it keeps is bounded below by
what was synced. The nodes record every sync in their fsync ledgers (``storage.fsync``, on when
the harness starts them with ``SAMSA_FSYNC_LEDGER=<path>``); ``power_loss`` reads them and, for
every file and directory under the data dirs:

- a regular file is cut to a point chosen by ``rng`` between its durable length (the last
  ledger record of its inode; 0 if never synced) and its current length: a quarter
  of the time at the durable length, a quarter not at all, else anywhere between;
- an entry (file or directory, with everything under it) that is not in its directory's last
  synced listing (same name, same inode) may vanish (by ``rng``, one in two): created or
  renamed in after the directory's last fsync, so its directory entry may never have reached
  the disk. A directory that was never synced has no durable entries at all;
- a rename that was not made durable reverts where the ledger tells: the entry's inode is
  listed under another name that no longer exists (one in two). An entry that replaced a
  listed one (same name, another inode) is kept as it is: the old inode's data is gone.

The model is truncation only (no torn pages, no zeroed holes) and treats the durable lengths
as exact, not page-rounded. Afterwards every data dir's state is appended to the ledger that
owns it as durable (what survived a crash is on the disk), so a later power loss in the same
run starts from it. ``power_loss`` returns one :class:`Cut` per change, for the history.

Ledger lines (``storage.fsync``): ``["f", path, inode, length]`` and
``["d", path, {name: inode}]``; later lines win; a torn last line is ignored.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Cut", "Ledger", "power_loss", "read_ledger", "record_durable"]

TRUNCATE = "truncate"
VANISH = "vanish"
REVERT_RENAME = "revert_rename"


@dataclass(frozen=True)
class Cut:
    """One change: ``truncate`` (file, from length, to length), ``vanish`` (the entry and all
    under it; ``from_length`` is a file's length, 0 for a directory), ``revert_rename`` (the
    entry went back to ``target``)."""

    path: str
    action: str
    from_length: int
    to_length: int
    target: str | None = None

    def as_fields(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value is not None}


@dataclass
class Ledger:
    """The last record of every synced file ((directory, inode) → length) and directory. A file's data belongs to its inode: a file synced as ``x.tmp`` and
    renamed ``x`` in the same directory keeps its durable length. Inodes are looked up per
    directory: the file system reuses a freed inode at once, often for a file of another node
    (whose ledger is another file, read in another order), and a length synced there says
    nothing here; within a directory the ledger's order is the order of events."""

    inodes: dict[tuple[str, int], int] = field(default_factory=dict)
    synced_paths: set[str] = field(default_factory=set)  # every path a sync was recorded for
    directories: dict[str, dict[str, int]] = field(default_factory=dict)

    def durable_length(self, path: str, inode: int) -> int:
        """The inode's last record in the file's directory: every record of a path updates it
        too, so it is never older than the path's own (found by G4: a quorum-state synced
        again as ``quorum-state.tmp`` at 175 bytes was cut to the 174 its path had before)."""
        return self.inodes.get((os.path.dirname(path), inode), 0)


def read_ledger(paths: Iterable[Path]) -> Ledger:
    """Every ledger, in the order given (a missing one is empty)."""
    ledger = Ledger()
    for path in paths:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        for line in text.splitlines():
            _apply(ledger, line)
    return ledger


def _apply(ledger: Ledger, line: str) -> None:
    try:
        record = json.loads(line)
    except json.JSONDecodeError:  # a torn last line
        return
    if record[0] == "f":
        ledger.inodes[(os.path.dirname(record[1]), record[2])] = record[3]
        ledger.synced_paths.add(record[1])
    elif record[0] == "d":
        ledger.directories[record[1]] = record[2]


def power_loss(
    data_dirs: Sequence[Path], ledger_paths: Sequence[Path], rng: random.Random
) -> list[Cut]:
    """Cut every data dir as an OS crash would (see the module docstring); every node must be
    dead. Returns the cuts, in a deterministic order for a given ``rng`` and file tree."""
    ledger = read_ledger(ledger_paths)
    cuts: list[Cut] = []
    roots = [os.path.abspath(directory) for directory in data_dirs]
    for root in roots:
        if os.path.isdir(root):
            _cut_directory(root, ledger, rng, cuts)
    for root in roots:
        record_durable(Path(root), _owner(root, ledger_paths))
    return cuts


def _cut_directory(directory: str, ledger: Ledger, rng: random.Random, cuts: list[Cut]) -> None:
    listing = ledger.directories.get(directory, {})
    with os.scandir(directory) as scan:
        entries = sorted(scan, key=lambda entry: entry.name)
    for entry in entries:
        if listing.get(entry.name) != entry.inode() and _undo_entry(
            directory, entry, listing, rng, cuts
        ):
            continue
        if entry.is_dir(follow_symlinks=False):
            _cut_directory(entry.path, ledger, rng, cuts)
        elif entry.is_file(follow_symlinks=False):
            _cut_file(entry, ledger, rng, cuts)


def _undo_entry(
    directory: str, entry: os.DirEntry[str], listing: dict[str, int], rng: random.Random,
    cuts: list[Cut],
) -> bool:
    """An entry its directory's last sync did not have: True if it went (vanished, or renamed
    back to the listed name of its inode, then left whole: that file was synced before)."""
    if entry.name in listing:
        return False  # replaced a listed entry by a rename: the old inode's data is gone
    inode = entry.inode()
    sources = [name for name, listed in listing.items()
               if listed == inode and not os.path.lexists(os.path.join(directory, name))]
    if not rng.random() < 0.5:
        return False
    length = _length(entry)
    if sources:
        target = os.path.join(directory, sources[0])
        os.rename(entry.path, target)
        cuts.append(Cut(entry.path, REVERT_RENAME, length, length, target))
        return True
    if entry.is_dir(follow_symlinks=False):
        shutil.rmtree(entry.path)
    else:
        os.unlink(entry.path)
    cuts.append(Cut(entry.path, VANISH, length, 0))
    return True


def _cut_file(entry: os.DirEntry[str], ledger: Ledger, rng: random.Random, cuts: list[Cut]) -> None:
    length = entry.stat(follow_symlinks=False).st_size
    durable = min(ledger.durable_length(entry.path, entry.inode()), length)
    if durable == length:
        return
    choice = rng.random()
    if choice < 0.25:
        to = durable
    elif choice < 0.5:
        return
    else:
        to = rng.randint(durable, length)
    if to != length:
        os.truncate(entry.path, to)
        cuts.append(Cut(entry.path, TRUNCATE, length, to))


def _length(entry: os.DirEntry[str]) -> int:
    return 0 if entry.is_dir(follow_symlinks=False) else entry.stat(follow_symlinks=False).st_size


def _owner(root: str, ledger_paths: Sequence[Path]) -> Path:
    """The ledger whose node writes under ``root`` (its records name it); else the first."""
    prefix = root.rstrip(os.sep) + os.sep
    for path in ledger_paths:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        if json.dumps(prefix)[:-1] in text or json.dumps(root) in text:
            return Path(path)
    return Path(ledger_paths[0])


def record_durable(root: Path, ledger_path: Path) -> None:
    """Append ``root``'s whole tree to the ledger as durable: every file at its length, every
    directory with its entries (the state after a crash is, by definition, on the disk)."""
    lines: list[str] = []
    for directory, _, _ in os.walk(os.path.abspath(root)):
        listing = {}
        with os.scandir(directory) as scan:
            for entry in scan:
                listing[entry.name] = entry.inode()
                if entry.is_file(follow_symlinks=False):
                    size = entry.stat(follow_symlinks=False).st_size
                    lines.append(json.dumps(["f", entry.path, entry.inode(), size]))
        lines.append(json.dumps(["d", directory, listing]))
    with open(ledger_path, "a", encoding="utf-8") as ledger:
        ledger.write("".join(line + "\n" for line in lines))
