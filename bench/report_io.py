"""Writes a report file atomically, as rpe-train writes its results: a temporary file beside
the target, flushed and fsynced, then renamed over it, so a reader (or a crash) sees the old
file or the new one, never half of one."""
import os
import tempfile


def write_atomic(path, text):
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
