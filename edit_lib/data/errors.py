"""Errors for bad input data: every one names the file, the line (or row) and the field."""
from __future__ import annotations

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


@dataclass
class SkipReport:
    """What an explicit skip mode dropped, and why (nothing is dropped silently)."""

    skipped: list[DataError] = field(default_factory=list)

    def add(self, err: DataError) -> None:
        self.skipped.append(err)

    def __len__(self) -> int:
        return len(self.skipped)

    def summary(self) -> str:
        if not self.skipped:
            return "0 records skipped"
        lines = [f"{len(self.skipped)} records skipped:"]
        lines += [f"  - {e}" for e in self.skipped[:20]]
        if len(self.skipped) > 20:
            lines.append(f"  ... and {len(self.skipped) - 20} more")
        return "\n".join(lines)
