"""Data layer: schema, synthetic rubric world, real-data loaders, rubric edits (App. A, App. I)."""
from edit_lib.data.errors import DataError, DataFileNotFound, SkipReport
from edit_lib.data.schema import (SPLITS, Coverage, Dataset, FreeTextScheme, Level, LevelScheme, MarkingPoint,
                     PointsScheme, Question, Response, round_half_up)

__all__ = ["SPLITS", "Coverage", "DataError", "DataFileNotFound", "Dataset", "FreeTextScheme", "Level",
           "LevelScheme", "MarkingPoint", "PointsScheme", "Question", "Response", "SkipReport", "round_half_up"]
