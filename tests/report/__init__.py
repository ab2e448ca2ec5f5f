"""Report tests: figures, report.md, trace.json and re-rendering, from small scenarios run once per module."""
