"""nrtrewrite: the Neuron runtime's load-time collective rewrite, offline."""

__version__ = "0.1.0"
