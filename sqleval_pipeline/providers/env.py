"""Where provider credentials and endpoints come from: environment variables, local hosts.

>>> env_value(None) is None
True
>>> is_local_url("http://localhost:11434/v1"), is_local_url("https://api.anthropic.com")
(True, False)
"""

from __future__ import annotations

import ipaddress
import os
from urllib.parse import urlsplit

__all__ = ["env_value", "is_local_url"]


def env_value(name: str | None) -> str | None:
    """The stripped value of environment variable ``name``; None when unset, empty or no name."""
    if not name:
        return None
    value = os.environ.get(name, "").strip()
    return value or None


def is_local_url(url: str) -> bool:
    """True for endpoints on this machine or a private network (no API key expected).

    Loopback and private/link-local addresses, ``localhost``, single-label host names (a
    Docker/Kubernetes service such as ``vllm``) and ``.local``/``.internal``/``.lan`` names.

    >>> is_local_url("http://127.0.0.1:8000/v1"), is_local_url("http://ollama:11434/v1")
    (True, True)
    >>> is_local_url("https://api.openai.com/v1")
    False
    """
    host = (urlsplit(url).hostname or "").lower().rstrip(".")
    if not host:
        return False
    if host == "localhost" or host.endswith((".localhost", ".local", ".internal", ".lan")):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return "." not in host
    return ip.is_loopback or ip.is_private or ip.is_link_local or ip.is_unspecified
