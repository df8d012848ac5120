"""Reading a file someone else may write (the agent's transcript, a config file in its project):
bounded in size, never blocking on what is not a regular file, and only the owner's.

A hook reads files an agent can write. Such a file can be made to turn the guard off: a sparse
60 GB transcript (``truncate -s 60G``) read whole is a ``MemoryError``; a FIFO or a link to a
device blocks the read or never ends (``/dev/zero``). ``read_bounded`` opens without blocking
(``O_NONBLOCK``: a FIFO opens at once, and is then refused), without following a link at the
last component unless asked, checks that what it opened is a regular file (of ``owner``, when
given: a process reading on another user's behalf reads only that user's files), skips a
sparse file's holes (they hold no line) and reads at most ``limit`` bytes. What it refuses is
one ``NotRead`` with a reason a log line can carry.
"""

from __future__ import annotations

import errno
import os
import stat

__all__ = ["NotRead", "read_bounded", "read_whole"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class NotRead(OSError):
    """A file ``read_bounded`` would not read: ``str`` is "<path>: <reason>"."""

    def __init__(self, path: str, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def read_whole(path: str, limit: int, *, follow: bool = True) -> bytes:
    """The whole of the regular file ``path`` (a config or settings file: a link to one is
    followed unless ``follow`` is false), refused as ``NotRead`` when it is over ``limit``
    bytes (its size, holes included: a sparse file is no smaller for them)."""
    data, _, size = read_bounded(path, limit, follow=follow, holes=False)
    if size > limit:
        raise NotRead(path, f"is over {limit} bytes")
    return data


def read_bounded(path: str, limit: int, offset: int = 0, *, owner: int | None = None,
                 follow: bool = False, holes: bool = True) -> tuple[bytes, int, int]:
    """``(data, start, size)``: at most ``limit`` bytes of the regular file ``path`` from byte
    ``start``, which is ``offset`` or, when a hole of a sparse file begins there, where its
    data resumes (``size`` when none does); ``size`` is the file's size. ``owner``: the uid the
    file must belong to. ``follow``: a symbolic link as the last component is followed (a
    config file kept as a link), else refused. ``holes``: a hole at ``offset`` is skipped (a
    log's reader: holes hold no line). Raises ``NotRead``."""
    try:
        fd = os.open(path, os.O_RDONLY | _NONBLOCK | _CLOEXEC | (0 if follow else _NOFOLLOW))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotRead(path, "is a symbolic link (not followed)") from None
        raise NotRead(path, f"{exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRead(path, "is not a regular file (a FIFO, a device, a socket or a "
                          "directory)")
        if owner is not None and st.st_uid != owner:
            raise NotRead(path, f"belongs to uid {st.st_uid}, not to uid {owner}")
        size = st.st_size
        start = min(max(0, offset), size)
        if holes and start < size and hasattr(os, "SEEK_DATA"):
            try:
                start = os.lseek(fd, start, os.SEEK_DATA)  # past a hole: it holds no line
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # a hole to the end
                    return b"", size, size
                if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
                    raise NotRead(path, f"{exc.strerror or exc}") from None
        want = min(limit, size - start)
        data = os.pread(fd, want, start) if want > 0 else b""
        return data, start, size
    except MemoryError:
        raise NotRead(path, f"no memory to read {limit} bytes") from None
    except NotRead:
        raise
    except OSError as exc:
        raise NotRead(path, f"{exc.strerror or exc}") from None
    finally:
        os.close(fd)
