"""The figure names a scenario's ``report: {plots: [...]}`` may use (kept light: the loader validates with it)."""

#: Name in the scenario -> the figure it selects.
PLOT_NAMES = {
    "timeline": "timeline", "link_utilisation": "links", "link_utilization": "links", "links": "links",
    "bandwidth": "bandwidth", "p2p": "p2p", "latency": "p2p", "scaling": "scaling", "breakdown": "breakdown",
    "closed_form": "closed_form", "pipeline": "pipeline", "layouts": "layouts", "which_layout": "layouts",
    "clusters": "clusters", "which_cluster": "clusters",
    "arrows": "arrows", "messages": "arrows",
}
