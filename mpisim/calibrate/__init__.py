"""``mpisim calibrate``: a preset fitted to the user's own cluster from OSU and nccl-tests output.

A capacity planner has a few measurements of the cluster they own and wants predictions for
what they have not measured. This package turns those measurements into a preset:

* :mod:`~mpisim.calibrate.osu`, :mod:`~mpisim.calibrate.nccl` -- one parser per tool's output
  format, producing :class:`~mpisim.calibrate.measurements.Series`;
* :mod:`~mpisim.calibrate.model` -- the preset's physically meaningful parameters, and the
  mpisim run that predicts each measured point;
* :mod:`~mpisim.calibrate.fit` -- which parameters the data can identify, the least-squares fit
  on relative error, the eager limit from the latency curve's knee, the hold-out check;
* :mod:`~mpisim.calibrate.output` -- the written preset (citing the files it came from) and the
  report (every point against both presets, residuals against size, warnings).

It sits beside :mod:`mpisim.scenario` and runs the simulator through it; the CLI only calls
:func:`~mpisim.calibrate.run.calibrate`.
"""
