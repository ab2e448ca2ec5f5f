"""Teaching: ``mpisim explain`` runs one collective algorithm on small arrays and explains it step by step.

The package splits that along its jobs: :mod:`.explain` runs the algorithm and gathers the
:class:`Explanation`; :mod:`.steps` recovers steps from the messages; :mod:`.decoding` decodes what
each message carries; :mod:`.segments` makes a pipelined algorithm's segments small enough to show;
:mod:`.rounds` groups them into rounds (one critical-path message each) and
what each round pays, :mod:`.roundview` prints them and :mod:`.spacetime` draws them against simulated
time, one frame per round; :mod:`.lesson` is the Python API (``mpisim.explain``);
:mod:`.formulas` reads, evaluates and substitutes the docstring cost formulas; :mod:`.differences`
says why a simulated time differs from its closed form; :mod:`.printing` writes the text and the
diagram. :mod:`.examples` regenerates the example reports (``python -m mpisim.teaching.examples``).
"""

from mpisim.teaching.decoding import decode, describe_pieces, encode, reference
from mpisim.teaching.differences import GENERIC_CAVEAT, differences
from mpisim.teaching.explain import DEFAULT_NETWORK_MODEL, Explanation, explain
from mpisim.teaching.formulas import Formula, FormulaError, evaluate, formulas, substitute
from mpisim.teaching.printing import explain_to, format_explanation, write_diagram
from mpisim.teaching.rounds import Round, rounds_of
from mpisim.teaching.spacetime import plot_spacetime, write_frames

__all__ = ["DEFAULT_NETWORK_MODEL", "GENERIC_CAVEAT", "Explanation", "Formula", "FormulaError", "Round",
           "decode", "describe_pieces", "differences", "encode", "evaluate", "explain", "explain_to",
           "format_explanation", "formulas", "plot_spacetime", "reference", "rounds_of", "substitute",
           "write_diagram", "write_frames"]
