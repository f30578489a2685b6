"""Where the app proposes to write a model (Train New Model's output, Save As), Qt-free.

A proposal is the first usable folder of a list the caller orders (the last folder trained into,
the documents folder, the home folder): one that exists, that this user may write into, and that
is not inside the files shipped with the app. The folder of the last opened checkpoint is no
proposal: after opening a shipped model it is ``assets/``, where a run would write beside (or a
Save As over) the shipped files, or a read-only installed package.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Sequence

from explorer.core.defaults import ASSETS


def usable_save_folder(folder: str | os.PathLike | None, shipped: Sequence[str | os.PathLike] = (ASSETS,)) -> bool:
    """Whether ``folder`` can take a new model.

    Parameters
    ----------
    folder : path-like or None
    shipped : sequence of path-like
        Folders never written into (by default the shipped files, :data:`explorer.core.defaults.ASSETS`).

    Returns
    -------
    bool
        True for a folder that exists, is writable and searchable by this user (``os.access``) and is
        not inside one of ``shipped``; False for None, "", a file, a missing or read-only folder, and a
        name the file system cannot take (NUL), never an exception.
    """
    if not folder:
        return False
    try:
        path = Path(folder).resolve()
        if not path.is_dir() or not os.access(path, os.W_OK | os.X_OK):
            return False
        return not any(path.is_relative_to(Path(s).resolve()) for s in shipped)  # the folder itself included
    except (OSError, ValueError, RuntimeError):  # RuntimeError: a symlink loop (Python < 3.13)
        return False


def proposed_save_folder(candidates: Iterable[str | os.PathLike | None],
                         shipped: Sequence[str | os.PathLike] = (ASSETS,)) -> str:
    """The first of ``candidates`` that :func:`usable_save_folder` accepts, else the last candidate
    given ("" when none was given): a name the user then sees and can change."""
    last = ""
    for folder in candidates:
        if folder:
            last = str(folder)
            if usable_save_folder(folder, shipped):
                return str(folder)
    return last
