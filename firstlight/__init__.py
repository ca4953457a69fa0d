"""firstlight: tells the people who run LLM servers when their server really serves, and what it is doing
until then.

The library API under the CLI: ``Config`` (what to watch), ``Session`` (one watch, launch or attach),
``Judge`` (observations in, verdict out), ``Ladder`` (the readiness probes), the samplers in
``firstlight.samplers`` and the engine profiles in ``firstlight.engines``.
"""

__version__ = "0.1.0"
