"""Running experiments: the registry of papers and experiments, the result store (content-addressed, atomic,
resumable, no pickle), local and Dask executors, progress, cost estimates, and the reproduction
(:func:`plan` → :func:`execute` → :func:`analyse`, or :func:`reproduce`) with its committed full records."""

from repdyn._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, names={
    **dict.fromkeys(["Plan", "analyse", "execute", "load_plan", "plan", "reproduce"], ".reproduce"),
    **dict.fromkeys(["ResultStore", "StoredRun"], ".store"),
    **dict.fromkeys(["build_record", "write_record"], ".records"),
    "run_tasks": ".executors",
})
