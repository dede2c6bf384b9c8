"""One Head per embedded catalog file: the SQLite store's :class:`~.lease.HeadLease`."""

from __future__ import annotations

import os
from pathlib import Path

from .base import StoreError
from .lease import SoleHead


class FileLease(SoleHead):
    """One Head per embedded catalog file: an exclusive lock on ``<file>.head`` held while it runs.

    The embedded store has no election: a second Head on the same file could
    commit beside the first and drive the same nodes, so it is refused.  The
    lock is the kernel's (``flock``): it goes with the process, however it ends.
    """

    def __init__(self, identifier: str, catalog_file: Path):
        super().__init__(identifier)
        import fcntl

        self.path = Path(str(catalog_file) + ".head")
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(self._fd, 4096, 0).decode(errors="replace").strip() or "another process"
            os.close(self._fd)
            raise StoreError(f"catalog {catalog_file} already has a Head ({holder}); the embedded SQLite "
                             "catalog serves one Head: to run several, put the catalog in ZooKeeper "
                             "(--store zk://HOST:PORT/CHROOT, docs/deploy.md)") from None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, f"pid {os.getpid()} at {identifier}\n".encode(), 0)

    def close(self) -> None:
        super().close()
        if self._fd >= 0:
            os.close(self._fd)  # releases the lock
            self._fd = -1
