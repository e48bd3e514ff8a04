"""The `cannrt` command line: one module per command.

- app.py: the typer application and `main` (the console script and `python -m cannrt`)
- demo.py: `cannrt demo`, the pipelined multi-stream workload checked against numpy
- exec.py: `cannrt exec program.py [args]`, an unmodified pyACL program on the simulated NPU
  (also `python -m cannrt.cli.exec program.py [args]`)
- plan.py: `cannrt plan FILE.csv`, static memory planning of a MiniMalloc CSV (cannrt.memory.planner)
- compare.py: `cannrt compare NPU_DIR [BENCH_DIR]`, msprobe-style accuracy compare of two dumps

Nothing is imported here, so that `python -m cannrt.cli.exec` does not load its module twice.
"""
