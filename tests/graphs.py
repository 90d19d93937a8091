"""A minimal directed graph for the tree-shape tests (networkx is optional)."""


class StandIn:
    """A minimal directed graph with ``nodes`` and ``successors`` (networkx's interface)."""

    def __init__(self, edges):
        self.edges = edges
        self.nodes = sorted({u for e in edges for u in e}, key=str)

    def successors(self, u):
        return iter([b for a, b in self.edges if a == u])
