"""The simulation model (pure): a continuous-batching server in virtual time and what each benchmark harness
measures, predicted from an engine's step terms; read by the simulated backend, ``plan`` and ``predict``."""
