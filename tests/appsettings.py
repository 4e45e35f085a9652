"""The query function's settings for an app under test.

Import it into a test module (``tests/`` is on ``sys.path``)::

    from appsettings import settings_for
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from anchored_query.settings import Settings


def settings_for(index: Path | str, tmp_path: Path, **overrides: Any) -> Settings:
    """``index`` served with its cache and feedback under ``tmp_path``, a check for a new
    build on every request and no rate limit, unless ``overrides`` say otherwise."""
    values: dict[str, Any] = {
        "index": str(index),
        "cache_dir": str(tmp_path / "cache"),
        "feedback": str(tmp_path / "feedback"),
        "refresh_s": 0,
        "rate_limit_per_min": 0,
    }
    values.update(overrides)
    return Settings(**values)
