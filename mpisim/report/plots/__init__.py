"""Figures: pure functions from result records to a matplotlib :class:`~matplotlib.figure.Figure`.

Each function reads a :class:`~mpisim.report.records.RunResult` (or one of its worlds) and
returns a new Figure, or ``None`` when the result holds nothing it could draw (a timeline
without span records, a bandwidth plot without collective rows): an empty axis is never
returned. The figures use matplotlib's object API only (``Figure()``, never ``pyplot``), so
they hold no global state and need no display; :mod:`mpisim.report.render` saves them with the
Agg canvas.

=======================  ==================================================================
figure                   what it answers
=======================  ==================================================================
``plot_timeline``        what every rank does when: compute, send, receive, wait, reduce,
                         and the protocol phases (RTS, CTS, data, FIN) of its messages
``plot_links``           which links bound the run and when: a heat map of the most utilised
                         links over time, next to each link's utilisation, by link class
``plot_bandwidth``       the nccl-tests view: time, algbw and busbw against message size,
                         one curve per algorithm (asked for: ``auto`` marks what it chose)
``plot_p2p``             OSU latency and bandwidth against size, with the switch from eager
                         to rendezvous marked
``plot_scaling``         capacity planning: iteration time and scaling efficiency against
                         ranks, one curve per interconnect (or collective time vs ranks)
``plot_breakdown``       compute vs exposed communication per iteration, stacked
``plot_closed_form``     simulated time next to the closed-form alpha-beta-gamma time
``plot_message_diagram`` teaching: ranks x time, one arrow per message, steps shaded
``plot_message_arrows``  a program's own run: ranks as lanes, simulated time across, one
                         arrow per message (a rendezvous as RTS, CTS, data and FIN)
=======================  ==================================================================

One module per job: :mod:`.timeline`, :mod:`.links`, :mod:`.sweeps` (size sweeps), :mod:`.p2p`,
:mod:`.scaling` (scaling and breakdown), :mod:`.closed_form`, :mod:`.diagram` (teaching), :mod:`.arrows`,
:mod:`.hybrid` (hybrid-parallel training: breakdown by dimension, pipeline, layouts), :mod:`.clusters`
(whole clusters of a sweep: iteration, time to train, cost, MFU), and
:mod:`.style` for what they share (colours, legends, size and time axes).

Sizes span decades, so size axes are logarithmic (base 2, labelled ``1 KiB``, ``1 MiB``) and
so are time axes where times do. Every axis names its quantity and unit.
"""

from mpisim.report.plots.arrows import plot_message_arrows
from mpisim.report.plots.closed_form import plot_closed_form
from mpisim.report.plots.clusters import plot_clusters
from mpisim.report.plots.diagram import plot_message_diagram
from mpisim.report.plots.hybrid import COST_COLOURS, plot_layouts, plot_parallel_breakdown, plot_pipeline
from mpisim.report.plots.links import plot_links
from mpisim.report.plots.p2p import plot_p2p
from mpisim.report.plots.scaling import plot_breakdown, plot_scaling
from mpisim.report.plots.style import KIND_COLOURS, time_unit
from mpisim.report.plots.sweeps import bandwidth_caption, bandwidth_curves, curve_column, plot_bandwidth
from mpisim.report.plots.timeline import plot_timeline

__all__ = [
    "COST_COLOURS",
    "KIND_COLOURS",
    "bandwidth_caption",
    "bandwidth_curves",
    "curve_column",
    "plot_bandwidth",
    "plot_breakdown",
    "plot_closed_form",
    "plot_clusters",
    "plot_layouts",
    "plot_links",
    "plot_message_arrows",
    "plot_message_diagram",
    "plot_p2p",
    "plot_parallel_breakdown",
    "plot_pipeline",
    "plot_scaling",
    "plot_timeline",
    "time_unit",
]
