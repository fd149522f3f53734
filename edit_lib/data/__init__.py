"""Data layer: schema, synthetic rubric world, real-data loaders, rubric edits (App. A, App. I)."""
from edit_lib.data.schema import (SPLITS, Coverage, DataError, DataFileNotFound, Dataset, FreeTextScheme, Level,
                                  LevelScheme, MarkingPoint, PointsScheme, Question, Response, SkipReport,
                                  round_half_up)

__all__ = ["SPLITS", "Coverage", "DataError", "DataFileNotFound", "Dataset", "FreeTextScheme", "Level",
           "LevelScheme", "MarkingPoint", "PointsScheme", "Question", "Response", "SkipReport", "round_half_up"]
