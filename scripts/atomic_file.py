"""Writes a file atomically, as rpe-train writes its results: a temporary file beside the
target, flushed and fsynced, then renamed over it, so a reader (or a crash) sees the old
file or the new one, never half of one. Used by the reports, plans and plots of bench/ and
scripts/ (import it with scripts/ on sys.path)."""
import io
import os
import tempfile


def write_atomic(path, data):
    """data: str (written as UTF-8) or bytes."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def save_png(fig, path, dpi=120):
    """A matplotlib figure as PNG, atomically."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    write_atomic(path, buf.getvalue())
