"""Sweeps: where, in a whole space of planner calls, do two planners disagree?

``mla_golden.sweep(a, b, space, ...)`` (and ``mla-golden sweep``) runs every
point of a space (or a seeded sample of it) on two planners, shrinks each
divergence to a minimal call, writes it as a pair of goldens and summarises
where the planners part as regions. Modules: :mod:`.planners` (the specs),
:mod:`.space` (the space file and its points), :mod:`.evaluate` (one point on
both planners), :mod:`.shrink`, :mod:`.regions`, :mod:`.executors` (local
processes or Ray), :mod:`.journal` (resuming), :mod:`.driver` (the loop) and
:mod:`.render` (text, JSON, HTML).
"""

from mla_golden.errors import SpaceError, SpecError, SweepError
from mla_golden.sweeper.driver import Findings, sweep
from mla_golden.sweeper.groups import Reproducer
from mla_golden.sweeper.planners import PlannerSpec, parse_planner_spec
from mla_golden.sweeper.space import Point, Space

__all__ = ["Findings", "PlannerSpec", "Point", "Reproducer", "Space", "SpaceError", "SpecError", "SweepError", "parse_planner_spec", "sweep"]
