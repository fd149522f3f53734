"""Data layer: schema, synthetic rubric world, real-data loaders, rubric edits (App. A, App. G)."""
from .errors import DataError, SkipReport
from .schema import (SPLITS, Coverage, Dataset, FreeTextScheme, Level, LevelScheme, MarkingPoint,
                     PointsScheme, Question, Response, round_half_up)

__all__ = ["SPLITS", "Coverage", "DataError", "Dataset", "FreeTextScheme", "Level", "LevelScheme",
           "MarkingPoint", "PointsScheme", "Question", "Response", "SkipReport", "round_half_up"]
