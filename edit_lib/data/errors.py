"""Errors for bad input data: every one names the file, the line (or row) and the field."""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field


class DataError(ValueError):
    """A malformed record. The message always names file, line and field so a user can fix it."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 field: str | None = None):
        self.path, self.line, self.field, self.reason = path, line, field, message
        where = []
        if path is not None:
            where.append(str(path))
        if line is not None:
            where.append(f"line {line}")
        if field is not None:
            where.append(f"field '{field}'")
        super().__init__(f"{': '.join([', '.join(where), message]) if where else message}")


class DataFileNotFound(FileNotFoundError):
    """A data file or folder that a profile or command names does not exist (a usage error, not bad data)."""


_VALUES = re.compile(r"'[^']*'|\"[^\"]*\"|-?\d+(?:\.\d+)?")


def reason_of(err: DataError) -> str:
    """The kind of a record error, for counting: its field and its message with values blanked
    ("gold: gold mark N outside [N, N]"), so records that fail the same way group together."""
    return f"{err.field or '<file>'}: {_VALUES.sub('N', err.reason)}"


@dataclass
class SkipReport:
    """What an explicit skip mode dropped, and why (nothing is dropped silently).

    ``n_records`` counts every non-blank record the readers met (kept or skipped), so
    ``len(report) / n_records`` is the share of the input that was dropped."""

    skipped: list[DataError] = field(default_factory=list)
    n_records: int = 0

    def add(self, err: DataError) -> None:
        self.skipped.append(err)

    def __len__(self) -> int:
        return len(self.skipped)

    def reason_counts(self) -> Counter:
        """Skipped records per reason (``reason_of``), most frequent first."""
        return Counter(reason_of(e) for e in self.skipped)

    def summary(self, head: int = 20) -> str:
        """Count, count per reason, and the first ``head`` skipped records in full."""
        if not self.skipped:
            return "0 records skipped"
        of = f" (of {self.n_records} read)" if self.n_records else ""
        lines = [f"{len(self.skipped)} records skipped{of}:"]
        lines += [f"  {n:5d} x {r}" for r, n in self.reason_counts().most_common()]
        lines.append(f"  first {min(head, len(self.skipped))}:")
        lines += [f"  - {e}" for e in self.skipped[:head]]
        if len(self.skipped) > head:
            lines.append(f"  ... and {len(self.skipped) - head} more")
        return "\n".join(lines)
