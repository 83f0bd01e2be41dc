"""The line that tells a user how to install an extra, said the same way by every module that needs one.

toolwire is not on a package index yet, so `pip install 'toolwire[x]'` alone would fail for anyone who
follows it; the hint also says how to install from a checkout of the repository (or a wheel built from
one) until it is published.
"""

from __future__ import annotations

__all__ = ["install_hint"]


def install_hint(extra: str) -> str:
    """`pip install 'toolwire[extra]'`, and what to run instead while toolwire is not on PyPI."""
    return (f"pip install 'toolwire[{extra}]' (until toolwire is on PyPI, install it from a checkout of its "
            f"repository: pip install '/path/to/toolwire[{extra}]')")
