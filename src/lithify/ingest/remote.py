"""Inputs named by URL (docs/scale.md, Inputs from URLs): ``s3://bucket/prefix/``, ``gs://…``,
``file://…``, or any scheme that pyarrow.fs or an installed fsspec implementation reads. A URL
is listed as a local folder is (its files in ``os.walk`` order, recursively, dot files left out)
and its files are read through the filesystem, ``.gz`` gunzipped, as local files are.

Credentials come from the filesystem's own environment (for S3: ``AWS_*`` variables, a profile,
an instance role; an endpoint by ``AWS_ENDPOINT_URL`` or ``?endpoint_override=`` in the URL).
A URL may hold secrets (``s3://key:secret@bucket/…``, a query), so it is never shown: summaries
and errors name ``str(RemoteFile)``, the URL without its user part and query.

pyarrow and fsspec are imported on the first URL, never for local inputs.
"""

from __future__ import annotations

import functools
import gzip
import io
import re
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import msgspec

if TYPE_CHECKING:
    from pyarrow.fs import FileSystem

__all__ = [
    "NoFilesystem",
    "RemoteFile",
    "expand_url",
    "filesystem",
    "is_url",
    "scrubbed",
    "shown",
    "walk_key",
]

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
# Reads of an object store are round trips: fewer, larger ones.
BUFFER = 4 << 20


class NoFilesystem(ValueError):
    """A URL whose scheme no installed filesystem reads (a usage error: nothing was read)."""


def is_url(value: object) -> bool:
    """Whether ``value`` is a URL (``scheme://…``) rather than a local path."""
    return isinstance(value, str) and _URL.match(value) is not None


def shown(url: str) -> str:
    """``url`` without what may be secret: its user part (``key:secret@``) and its query."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))


def scrubbed(message: str, url: str) -> str:
    """An error about ``url`` without the secrets the URL may hold, should it quote them."""
    parts = urlsplit(url)
    for secret in (parts.password, parts.query):
        if secret:
            message = message.replace(secret, "…")
    return message


@functools.lru_cache(maxsize=64)
def filesystem(url: str) -> tuple[FileSystem, str]:
    """The filesystem that reads ``url`` (pyarrow's own, else fsspec's wrapped in pyarrow's
    interface) and the path in it. Raises ``NoFilesystem`` naming what to install; ``OSError``
    when the filesystem is there but cannot be reached."""
    import pyarrow as pa
    import pyarrow.fs as pafs

    scheme = url.split("://", 1)[0].lower()
    try:
        return pafs.FileSystem.from_uri(url)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ImportError):
        pass  # not a scheme pyarrow reads (or not in this build of it): fsspec's, if any
    try:
        import fsspec
    except ImportError:
        raise NoFilesystem(
            f"no filesystem reads {scheme}:// here: pyarrow.fs does not, and fsspec is not "
            f"installed (pip install fsspec, and fsspec's implementation of {scheme}://)"
        ) from None
    try:
        fs, path = fsspec.core.url_to_fs(url)
    except ImportError as e:  # fsspec knows the scheme; the package that reads it is missing
        raise NoFilesystem(f"{scheme}:// needs a package that is not installed: {e}") from None
    except ValueError:
        raise NoFilesystem(
            f"no filesystem reads {scheme}:// here: neither pyarrow.fs nor fsspec knows it "
            "(install the fsspec implementation of that scheme)"
        ) from None
    return pafs.PyFileSystem(pafs.FSSpecHandler(fs)), path


class RemoteFile(msgspec.Struct, frozen=True):
    """One file under a URL. ``url`` is the URL as given (it opens the filesystem and may hold
    credentials); ``path`` the file's path in that filesystem; ``name`` what summaries and
    errors call it. ``size`` is None for a file not found, ``error`` says why a URL could
    not be listed."""

    url: str
    path: str
    name: str
    size: int | None = None
    error: str | None = None

    def __str__(self) -> str:
        return self.name

    @property
    def suffix(self) -> str:
        return PurePosixPath(self.name).suffix

    @property
    def suffixes(self) -> list[str]:
        return PurePosixPath(self.name).suffixes

    def open(self) -> IO[bytes]:
        """The file for reading, buffered and seekable, gunzipped when it ends in ``.gz``;
        ``OSError`` (saying nothing secret) when it cannot be opened."""
        try:
            fs, _ = filesystem(self.url)
            native = fs.open_input_file(self.path)
        except OSError as e:
            raise OSError(scrubbed(str(e), self.url)) from None
        raw = io.BufferedReader(native, BUFFER)  # type: ignore[arg-type]
        if self.suffix == ".gz":  # what every reader of lithify takes .gz to mean
            return _Gunzip(raw)
        return raw


class _Gunzip(gzip.GzipFile):
    """A gzip stream that closes the file under it (``GzipFile`` leaves a given one open)."""

    def __init__(self, raw: IO[bytes]) -> None:
        super().__init__(fileobj=raw, mode="rb")
        self._raw = raw

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._raw.close()


def walk_key(relative: str) -> tuple[tuple[int, str], ...]:
    """Sorting by this puts the files of a folder tree (``a/b/c.json``, relative to the tree)
    in the order ``files.expand`` walks a local folder: a folder's files by name, then its
    folders by name, each walked the same way."""
    *folders, name = relative.split("/")
    return (*((1, f) for f in folders), (0, name))


def expand_url(url: str) -> Iterator[RemoteFile]:
    """The files under ``url`` in ``walk_key`` order, or the file it names (a file that is not
    there, or a URL that cannot be listed, comes out as one file that will not read, as a
    missing local path does)."""
    from pyarrow.fs import FileSelector, FileType

    base = shown(url)
    try:
        fs, root = filesystem(url)
        info = fs.get_file_info(root)
        if info.type != FileType.Directory:
            size = info.size if info.type == FileType.File else None
            yield RemoteFile(url, root, base, size)
            return
        found = fs.get_file_info(FileSelector(root, recursive=True))
    except OSError as e:
        yield RemoteFile(url, "", base, error=scrubbed(str(e), url))
        return
    prefix = root.rstrip("/") + "/"
    files: list[tuple[str, Any]] = []
    for item in found:
        relative = item.path.removeprefix(prefix)
        if item.type == FileType.File and not relative.rpartition("/")[2].startswith("."):
            files.append((relative, item))
    files.sort(key=lambda f: walk_key(f[0]))
    for relative, item in files:
        yield RemoteFile(url, item.path, f"{base.rstrip('/')}/{relative}", item.size)
