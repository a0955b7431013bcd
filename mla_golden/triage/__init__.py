"""Triage over aiter's history: which commit changed a plan (``bisect``), and which commits changed the planner
(``history``, the planner changelog). Both read an aiter git clone (:mod:`mla_golden.aiter_build.repo`) and plan
each commit with a port where one plans alike, else with the commit's own tree built for the host."""
