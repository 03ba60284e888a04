"""What root may run: sparkscope started as root (the block I/O probe needs
it) runs programs and Python modules only from where nobody but root could
have put or changed them. Stdlib only: the probes' images copy it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional


def why_untrusted(path: Path) -> Optional[str]:
    """None when a program (or package dir) that root is about to run could only
    have been put there by root: it and every directory above it, through
    symlinks too, belong to root and nobody else may write to them (a sticky
    directory such as /tmp excepted for the entries others do not own).
    Otherwise, why not: the user whose file it is could make root run anything."""
    if os.geteuid() != 0:
        return None
    seen: set[Path] = set()
    for candidate in (Path(os.path.abspath(path)), Path(os.path.realpath(path))):
        for node in (candidate, *candidate.parents):
            if node in seen:
                continue
            seen.add(node)
            try:
                st = node.lstat()
            except OSError as err:
                return f"{node}: {err.strerror}"
            if node.is_symlink():
                continue  # its own mode means nothing; where it points is checked too
            writable = st.st_mode & 0o022
            sticky = st.st_mode & 0o1000
            if st.st_uid != 0:
                return f"{node} belongs to uid {st.st_uid}, not root"
            if writable and not (sticky and node != candidate and node.is_dir()):
                return f"{node} is writable by {'group and others' if st.st_mode & 0o002 else 'its group'}"
    return None
