"""Network layer: who can send how many bytes to whom, and when they arrive.

Topologies (nodes, ranks, directed links, routes), presets, and the network models behind
the one ``transfer(src, dst, nbytes)`` interface.
"""
