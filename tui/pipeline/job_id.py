"""The identity of a job: a random id made once per output directory, kept in ``job_id``.

It travels into the bucket's manifest, so two jobs never share an S3 prefix by mistake: shard
names restart at 1 in every output directory, and a second directory uploading to the same prefix
would overwrite the first one's shards under the same names. A directory from before job ids gets
one on its next run; a manifest without one is adopted and stamped.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from tui.inputs import HOLDER_LIMIT, read_text
from tui.outputs import replace_file, writing

JOB_ID_NAME = "job_id"
"""The file in the output directory."""


def job_id(out: Path) -> str:
    """The output directory's job id, made (atomically, fsynced) when it has none.

    Args:
        out: The output directory (held by this run's lock).

    Returns:
        32 hex digits.

    Raises:
        ValueError: the file exists but does not hold an id (naming it).
        OSError: it cannot be read or written.
    """
    path = out / JOB_ID_NAME
    try:
        # The one door: a FIFO or device in the output directory is refused, not waited on.
        text = read_text(path, HOLDER_LIMIT, "a job id file").strip()
    except FileNotFoundError:
        made = uuid.uuid4().hex
        with writing(path):
            replace_file(path, (made + "\n").encode(), mode=0o644)
        return made
    except UnicodeDecodeError:
        text = ""
    if len(text) != 32 or any(c not in "0123456789abcdef" for c in text):
        raise ValueError(f"{path}: not a job id (32 hex digits); was it edited?")
    return text
