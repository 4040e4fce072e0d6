"""The toy DSA target/draft models, their graph runners and the EAGLE decode loop."""

from .loop import EagleLoop, LoopConfig, RunResult, run_loop
from .toy import ForwardBatch, ModelConfig, ToyDSAModel

__all__ = [
    "EagleLoop",
    "ForwardBatch",
    "LoopConfig",
    "ModelConfig",
    "RunResult",
    "ToyDSAModel",
    "run_loop",
]
