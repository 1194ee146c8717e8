"""clestim: scikit-learn-compatible continual-learning estimators."""

from .base import ContinualClassifier
from .evaluation import RunsResult, StreamResult, evaluate_runs, evaluate_stream
from .methods import (
    AGEM,
    ASER,
    CLOPS,
    DER,
    DT2W,
    ENS,
    ENSGEN,
    ENSGENDEL,
    ER,
    EWC,
    FDR,
    GEM,
    GR,
    GSS,
    HAL,
    MAS,
    DERpp,
    Herding,
    LwF,
    Naive,
    Offline,
)
from .metrics import make_stream_scorer
from .model_selection import ContinualGridSearch
from .pipeline import ContinualPipeline, make_continual_pipeline
from .streams import (
    BasicScenario,
    Blurry,
    ClassIncremental,
    DomainIncremental,
    StreamPart,
    TaskPool,
    validation_experiment_split,
)

__all__ = [
    # estimators
    "AGEM",
    "ASER",
    "CLOPS",
    "DER",
    "DERpp",
    "DT2W",
    "ENS",
    "ENSGEN",
    "ENSGENDEL",
    "ER",
    "EWC",
    "FDR",
    "GEM",
    "GR",
    "GSS",
    "HAL",
    "ContinualClassifier",
    "Herding",
    "LwF",
    "MAS",
    "Naive",
    "Offline",
    # streams
    "BasicScenario",
    "Blurry",
    "ClassIncremental",
    "DomainIncremental",
    "StreamPart",
    "TaskPool",
    "validation_experiment_split",
    # evaluation, scoring, model selection, pipelines
    "ContinualGridSearch",
    "ContinualPipeline",
    "RunsResult",
    "StreamResult",
    "evaluate_runs",
    "evaluate_stream",
    "make_continual_pipeline",
    "make_stream_scorer",
]
__version__ = "0.1.0"
