"""Pick a `SchemaRegistry` implementation from a URL or a folder path.

    open_registry("http://127.0.0.1:8081")            -> HttpSchemaRegistry
    open_registry("https://user:pass@sr.example")     -> HttpSchemaRegistry (basic auth)
    open_registry("dir:/srv/schemas")                  -> DirectorySchemaRegistry
    open_registry("/srv/schemas")                      -> DirectorySchemaRegistry (a folder)

Keyword arguments (auth, TLS, timeouts) go to `HttpSchemaRegistry`; a folder takes none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .directory_registry import DirectorySchemaRegistry
from .http_registry import HttpSchemaRegistry
from .registry import SchemaRegistry


def open_registry(url_or_path: str | Path, **options: Any) -> SchemaRegistry:
    """Open the registry a URL (http, https) or folder ("dir:/path" or a path) names.

    Raises:
        ValueError: the argument names neither a URL nor an existing folder.
    """
    target = str(url_or_path)
    if target.startswith(("http://", "https://")):
        return HttpSchemaRegistry(target, **options)
    if target.startswith("dir:"):
        target = target[len("dir:") :]
    elif target.startswith("file://"):
        target = target[len("file://") :]
    elif not Path(target).is_dir():
        raise ValueError(
            "registry must be an http(s):// URL, dir:/path or an existing folder; got "
            + repr(target.rsplit("@", 1)[-1])  # whatever precedes an @ may be credentials
        )
    if options:
        raise ValueError(f"a folder registry takes no options, got {sorted(options)}")
    return DirectorySchemaRegistry(target)
