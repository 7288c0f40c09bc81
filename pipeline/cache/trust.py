"""Proof that cpq wrote a cache file: seals under a secret key of the user's.

Whatever a cache folder holds may have been put there by someone else: a `.cpq/` committed
with a repository, a CI cache restored from another branch, a shared folder.  So every file a
cache keeps is sealed when cpq writes it: an HMAC-SHA256 under the user's secret key, of the
file's bytes, of what it is (its kind) and of the key it is kept under.  Nothing is read from a
cache file whose seal does not match its bytes; such a file is rebuilt.  The secret key lives
outside every cache (`$XDG_STATE_HOME/cpq/cache-key`, created 0600, or the environment variable
CPQ_CACHE_KEY), so whoever can write a cache cannot forge a seal.

Files are read without following symbolic links and only when they are regular files, so a
cache entry can never make cpq read a FIFO (and block), a device or a file elsewhere.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import io
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

KEY_ENV = "CPQ_CACHE_KEY"
KEY_BYTES = 32
SEAL_SUFFIX = ".seal"
_SEAL_HEADER = "cpq-seal/1"
_SEAL_MAX_BYTES = 4096
# Bytes read and MACed at a time.  Large: a results file is sealed in a thread while the
# report's Python runs, and each chunk makes the sealing thread wait for the interpreter twice,
# up to its 5 ms switch interval each time (1 MiB chunks: 0.7 s for a 68 MB file beside a busy
# thread, against 0.1 s with these).
_CHUNK = 16 << 20


class Untrusted(Exception):
    """A cache file cpq cannot prove it wrote, or cannot read safely; the message says why."""


def key_path() -> Path:
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "cpq" / "cache-key"


@functools.cache
def secret_key() -> bytes:
    """The key every seal is made with; Untrusted (with the reason) when none can be had."""
    given = os.environ.get(KEY_ENV)
    if given:
        return hashlib.sha256(b"cpq cache key\0" + given.encode("utf-8", "surrogatepass")).digest()
    try:
        path = key_path()
    except RuntimeError as exc:  # no home folder
        raise Untrusted(f"no secret key for the cache: {exc}") from None
    for _ in range(3):
        try:
            return _read_key(path)
        except FileNotFoundError:
            pass
        try:
            _create_key(path)
        except FileExistsError:  # made meanwhile by a concurrent run: read it
            continue
        except OSError as exc:
            raise Untrusted(f"cannot create the cache key {path}: {exc.strerror}") from None
    raise Untrusted(f"cannot read the cache key {path}")


def _read_key(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise Untrusted(f"cannot read the cache key {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise Untrusted(f"the cache key {path} is not a regular file")
        if info.st_uid != os.geteuid() or info.st_mode & 0o077:
            raise Untrusted(f"the cache key {path} is readable or owned by another user")
        key = file.read(KEY_BYTES + 1)
    if len(key) != KEY_BYTES:
        raise Untrusted(f"the cache key {path} is damaged (remove it to make a new one)")
    return key


def _create_key(path: Path) -> None:
    """A new random key, written whole under a temporary name, then linked into place (which
    fails if a concurrent run made one first)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(secrets.token_bytes(KEY_BYTES))
        os.link(temporary, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary)


def _mac(kind: str, label: str) -> hmac.HMAC:
    """An HMAC under the secret key, started with what is sealed: its kind and its label."""
    mac = hmac.new(secret_key(), digestmod="sha256")
    for part in (kind, label):
        data = part.encode("utf-8", "surrogatepass")
        mac.update(len(data).to_bytes(8, "little") + data)
    return mac


def sign(kind: str, label: str, data: bytes) -> bytes:
    """A MAC of `data` (small, in memory) as a `kind` kept under `label`."""
    mac = _mac(kind, label)
    mac.update(data)
    return mac.digest()


def signed_matches(kind: str, label: str, data: bytes, tag: bytes) -> bool:
    return hmac.compare_digest(sign(kind, label, data), tag)


# -- regular files, read without following links ------------------------------------------


@dataclass(frozen=True)
class Identity:
    """What tells a file apart from one put in its place or changed since it was checked."""

    device: int
    inode: int
    size: int
    modified_ns: int
    changed_ns: int

    @classmethod
    def of(cls, info: os.stat_result) -> Identity:
        return cls(info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def open_regular(path: Path) -> int:
    """A descriptor of the regular file `path` (never through a symbolic link, never blocking on
    a FIFO); FileNotFoundError when there is none, Untrusted when something else is there."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:  # ELOOP: a symbolic link; EACCES, ...
        raise Untrusted(f"{path.name}: cannot be read safely ({exc.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise Untrusted(f"{path.name} is not a regular file")
    return fd


def kind_of(path: Path) -> str | None:
    """'file', 'missing', or what else is at `path` (a link, a folder, a FIFO ...)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    return "not a regular file"


def identity(path: Path) -> Identity | None:
    """The identity of the file now at `path` (links followed, as DuckDB follows them)."""
    try:
        return Identity.of(os.stat(path))
    except OSError:
        return None


# -- sealed files ---------------------------------------------------------------------------


def seal_path(path: Path) -> Path:
    return path.with_name(path.name + SEAL_SUFFIX)


def write_seal(path: Path, kind: str, label: str, parts: list[Path], meta: dict[str, str]) -> Identity:
    """Seal the files `parts` (the first is `path`; a missing later part counts as empty) as a
    `kind` kept under `label`, with `meta` (short strings the seal vouches for too), in the file
    beside `path`.  Returns the identity of `path` as sealed."""
    mac = _mac(kind, label)
    _mac_meta(mac, meta)
    sealed = _mac_parts(mac, parts)
    lines = [
        _SEAL_HEADER,
        *(f"{key} {value}" for key, value in sorted(meta.items())),
        f"mac {mac.hexdigest()}",
    ]
    write_file(seal_path(path), ("\n".join(lines) + "\n").encode())
    return sealed


def read_seal(path: Path) -> dict[str, str]:
    """The metadata of the seal beside `path`, unchecked (check with `verify`)."""
    try:
        fd = open_regular(seal_path(path))
    except FileNotFoundError:
        raise Untrusted(f"{path.name} has no seal") from None
    with os.fdopen(fd, "rb") as file:
        raw = file.read(_SEAL_MAX_BYTES + 1)
    if len(raw) > _SEAL_MAX_BYTES:
        raise Untrusted(f"{path.name}: its seal is too large")
    try:
        lines = raw.decode("ascii").splitlines()
    except UnicodeDecodeError:
        raise Untrusted(f"{path.name}: its seal is damaged") from None
    if not lines or lines[0] != _SEAL_HEADER:
        raise Untrusted(f"{path.name}: its seal is damaged")
    meta: dict[str, str] = {}
    for line in lines[1:]:
        key, _, value = line.partition(" ")
        if not key or key in meta:
            raise Untrusted(f"{path.name}: its seal is damaged")
        meta[key] = value
    if "mac" not in meta:
        raise Untrusted(f"{path.name}: its seal is damaged")
    return meta


def verify(
    path: Path, kind: str, label: str, parts: list[Path], copy_to: Path | None = None
) -> tuple[dict[str, str], Identity]:
    """Check the seal beside `path` against the bytes of `parts` (the first is `path`), read once;
    returns the seal's metadata and the identity of `path` as checked, or raises Untrusted.
    With `copy_to`, `path`'s bytes are copied there as they are read (the copy is removed when
    the check fails), so the copy holds exactly the bytes that were checked."""
    meta = read_seal(path)
    mac = _mac(kind, label)
    _mac_meta(mac, {k: v for k, v in meta.items() if k != "mac"})
    try:
        checked = _mac_parts(mac, parts, copy_to)
    except FileNotFoundError:
        raise Untrusted(f"{path.name} is missing") from None
    if not hmac.compare_digest(mac.hexdigest(), meta["mac"]):
        if copy_to is not None:
            with contextlib.suppress(OSError):
                copy_to.unlink()
        raise Untrusted(f"{path.name} does not match its seal")
    return {k: v for k, v in meta.items() if k != "mac"}, checked


def _mac_meta(mac: hmac.HMAC, meta: dict[str, str]) -> None:
    for key, value in sorted(meta.items()):
        if not key.isidentifier() or "\n" in value:
            raise ValueError(f"seal metadata {key!r} cannot be written")
        data = f"{key} {value}".encode("utf-8", "surrogatepass")
        mac.update(len(data).to_bytes(8, "little") + data)


def _mac_parts(mac: hmac.HMAC, parts: list[Path], copy_to: Path | None = None) -> Identity:
    """Feed the files' bytes (each after its length) to `mac`; the first must exist."""
    first: Identity | None = None
    for index, part in enumerate(parts):
        try:
            fd = open_regular(part)
        except FileNotFoundError:
            if index == 0:
                raise
            mac.update((0).to_bytes(8, "little"))
            continue
        with os.fdopen(fd, "rb") as file:
            info = os.fstat(file.fileno())
            if first is None:
                first = Identity.of(info)
            mac.update(info.st_size.to_bytes(8, "little"))
            if index == 0 and copy_to is not None:
                _copy_and_mac(file, info.st_size, copy_to, mac, part.name)
                continue
            if _feed(file, mac) != info.st_size:
                raise Untrusted(f"{part.name} changed while it was read")
    assert first is not None
    return first


def _feed(file: io.BufferedIOBase, mac: hmac.HMAC) -> int:
    """Feed the rest of `file` to `mac`, _CHUNK bytes at a time through one buffer (a new
    bytes object per chunk costs its page faults each time); returns the bytes read."""
    buffer = memoryview(bytearray(min(_CHUNK, max(os.fstat(file.fileno()).st_size, 1))))
    read = 0
    while count := file.readinto(buffer):
        mac.update(buffer[:count])
        read += count
    return read


def _copy_and_mac(source: BinaryIO, size: int, copy_to: Path, mac: hmac.HMAC, name: str) -> None:
    """Copy `source` (`size` bytes) to a new file at `copy_to`, and feed the bytes of the copy
    to `mac`: the copy holds exactly the bytes checked.  The kernel copies (copy_file_range,
    five times faster than through Python on a 125 MB results file, which every update of the
    saved results copies); where it cannot, the bytes go through here.  The copy is removed
    when anything fails."""
    target = _create(copy_to, readable=True)
    try:
        copied = 0
        try:
            while copied < size:
                n = os.copy_file_range(source.fileno(), target.fileno(), size - copied)
                if n == 0:
                    break
                copied += n
        except OSError:  # not supported here (another file system, an old kernel, ...)
            source.seek(0)
            target.seek(0)
            target.truncate()
            copied = 0
            while chunk := source.read(_CHUNK):
                target.write(chunk)
                copied += len(chunk)
        if copied != size or source.read(1):
            raise Untrusted(f"{name} changed while it was read")
        target.flush()
        target.seek(0)
        if _feed(target, mac) != size:
            raise Untrusted(f"{name} changed while it was read")
    except BaseException:
        target.close()
        with contextlib.suppress(OSError):
            os.unlink(copy_to)  # not target.name: a file opened from a descriptor is named by it
        raise
    target.close()


def _create(path: Path, readable: bool = False):  # type: ignore[no-untyped-def]
    """A new file at `path`, never through a link left there."""
    with contextlib.suppress(FileNotFoundError):
        if kind_of(path) == "file":
            os.unlink(path)
    mode = os.O_RDWR if readable else os.O_WRONLY
    fd = os.open(path, mode | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    return os.fdopen(fd, "w+b" if readable else "wb")


def write_file(path: Path, data: bytes) -> None:
    """Write `data` as the file `path`, whole or not at all (a temporary file renamed over it;
    a rename replaces a link rather than writing through it)."""
    temporary = path.with_name(f"{path.name}.{os.getpid()}.partial")
    with _create(temporary) as file:
        file.write(data)
    try:
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def remove_file(path: Path) -> None:
    """Remove `path` if it is a regular file or a link (never what a link points to, never a
    folder); other kinds are left alone."""
    if kind_of(path) in ("file", "a symbolic link"):
        with contextlib.suppress(OSError):
            os.unlink(path)
