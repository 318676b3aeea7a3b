"""Hydra's composition errors (an unknown group option, a malformed override) as one line.

Hydra reports them itself with exit code 1 and its search path; meeple reports every config
mistake as one ``meeple: error: ...`` line with exit code 2 (the same as a bad value).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

EXIT_USAGE = 2


@contextlib.contextmanager
def one_line_config_errors() -> Iterator[None]:
    """Run ``train.py``'s Hydra main inside this: composition errors become one line, exit 2."""
    from hydra.errors import (
        ConfigCompositionException,
        MissingConfigException,
        OverrideParseException,
    )

    keep = os.environ.get("HYDRA_FULL_ERROR")
    os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra re-raises instead of printing its report
    try:
        yield
    except MissingConfigException as err:
        options = getattr(err, "options", None)
        accepted = f"; accepted: {', '.join(options)}" if options else ""
        _fail(f"{_first_line(err)}{accepted}")
    except (ConfigCompositionException, OverrideParseException) as err:
        cause = f" ({_first_line(err.__cause__)})" if err.__cause__ is not None else ""
        _fail(f"{_first_line(err)}{cause}")
    finally:
        if keep is None:
            os.environ.pop("HYDRA_FULL_ERROR", None)
        else:
            os.environ["HYDRA_FULL_ERROR"] = keep


def _first_line(err: BaseException) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__


def _fail(message: str) -> None:
    print(f"meeple: error: {message}", file=sys.stderr)
    sys.exit(EXIT_USAGE)
