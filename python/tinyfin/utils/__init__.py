"""tinyfin.utils: data loading (tinyfin.utils.data)."""
from . import data  # noqa: F401
